#include "kernels/cpu/logit_refinement.hpp"

#include <array>
#include <cstring>

namespace troupe::cpu {

namespace {

float table_value(const void* row, dtype type, std::int64_t k) {
  switch (type) {
    case dtype::f32:
      return static_cast<const float*>(row)[k];
    case dtype::f16:
      return f16_to_float(static_cast<const std::uint16_t*>(row)[k]);
    case dtype::bf16:
      break;
  }
  return bf16_to_float(static_cast<const std::uint16_t*>(row)[k]);
}

// Eight independent sums so the compiler can keep them in one vector.
float exact_dot(const float* x, const void* row, dtype type, std::int64_t hidden) {
  std::array<float, 8> sums{};
  std::int64_t k = 0;
  if (type == dtype::bf16) {
    const auto* bits = static_cast<const std::uint16_t*>(row);
    for (; k + 8 <= hidden; k += 8) {
      for (int j = 0; j < 8; ++j) sums[j] += x[k + j] * bf16_to_float(bits[k + j]);
    }
  }
  for (; k + 8 <= hidden; k += 8) {
    for (int j = 0; j < 8; ++j) sums[j] += x[k + j] * table_value(row, type, k + j);
  }
  float total = 0;
  for (; k < hidden; ++k) total += x[k] * table_value(row, type, k);
  for (float sum : sums) total += sum;
  return total;
}

// (a, id ia) ranks above (b, id ib): the larger logit, the lower id among
// equal ones, NaN below every number (a broken row's NaN never crowds out a
// logit that could win).
bool ranks_above(float a, std::int64_t ia, float b, std::int64_t ib) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return !a_nan || (b_nan && ia < ib);
  return a > b || (a == b && ia < ib);
}

}  // namespace

void refine_logit_row(const float* x, const void* table, dtype table_type, std::int64_t table_stride,
                      std::int64_t hidden, std::int64_t vocab, int candidates, float* logits, std::int32_t* ids,
                      float* values) {
  // One pass keeping the best `candidates` seen; a new entry displaces the
  // current weakest (the lowest ranked, ranks_above) only when it ranks above
  // it, which a later id does only with a larger logit.
  int weakest = 0;
  for (int c = 0; c < candidates; ++c) {
    ids[c] = c;
    values[c] = logits[c];
    if (ranks_above(values[weakest], ids[weakest], values[c], c)) weakest = c;
  }
  for (std::int64_t v = candidates; v < vocab; ++v) {
    const float bar = values[weakest];
    if (!(logits[v] > bar || (bar != bar && logits[v] == logits[v]))) continue;
    ids[weakest] = static_cast<std::int32_t>(v);
    values[weakest] = logits[v];
    for (int c = 0; c < candidates; ++c) {
      if (ranks_above(values[weakest], ids[weakest], values[c], ids[c])) weakest = c;
    }
  }
  const std::size_t row_bytes = static_cast<std::size_t>(table_stride) * dtype_size(table_type);
  for (int c = 0; c < candidates; ++c) {
    const void* row = static_cast<const std::byte*>(table) + static_cast<std::size_t>(ids[c]) * row_bytes;
    logits[ids[c]] = exact_dot(x, row, table_type, hidden);
  }
}

}  // namespace troupe::cpu
