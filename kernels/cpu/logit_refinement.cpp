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

}  // namespace

void refine_logit_row(const float* x, const void* table, dtype table_type, std::int64_t table_stride,
                      std::int64_t hidden, std::int64_t vocab, int candidates, float* logits, std::int32_t* ids,
                      float* values) {
  // One pass keeping the best `candidates` seen; a new entry displaces the
  // current minimum (the latest-indexed of equal minima) only when larger.
  int weakest = 0;
  for (int c = 0; c < candidates; ++c) {
    ids[c] = c;
    values[c] = logits[c];
    if (!(values[c] > values[weakest])) weakest = c;
  }
  for (std::int64_t v = candidates; v < vocab; ++v) {
    if (!(logits[v] > values[weakest])) continue;
    ids[weakest] = static_cast<std::int32_t>(v);
    values[weakest] = logits[v];
    for (int c = 0; c < candidates; ++c) {
      if (values[c] < values[weakest] || (values[c] == values[weakest] && ids[c] > ids[weakest])) weakest = c;
    }
  }
  const std::size_t row_bytes = static_cast<std::size_t>(table_stride) * dtype_size(table_type);
  for (int c = 0; c < candidates; ++c) {
    const void* row = static_cast<const std::byte*>(table) + static_cast<std::size_t>(ids[c]) * row_bytes;
    logits[ids[c]] = exact_dot(x, row, table_type, hidden);
  }
}

}  // namespace troupe::cpu
