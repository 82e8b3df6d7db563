// linear() in batch-invariant mode: an activation row's outputs are the same
// bits whatever the row count (one pass over K for few rows, K-blocked for
// many), the row's position among the others and the thread count, at every
// dispatch level and for every weight type; and they match a
// double-precision reference.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "tests/kernels/cpu_test_support.hpp"

namespace troupe {
namespace {

using test::padded_matrix;
using test::random_source;

std::unique_ptr<backend> invariant_backend(cpu::isa_level level, int threads) {
  cpu::cpu_backend_options options;
  options.threads = threads;
  options.max_isa = level;
  options.batch_invariant = true;
  return cpu::make_cpu_backend(options);
}

/// A weight of two stacked parts with biases, as prepare_linear takes it.
struct stacked_weight {
  std::int64_t k = 0;
  std::vector<test::stored_values> parts;
  std::vector<std::vector<float>> biases;
  std::vector<host_tensor> tensors, bias_tensors;

  stacked_weight(random_source& rng, dtype type, std::int64_t in, const std::vector<std::int64_t>& outs) : k(in) {
    for (std::int64_t out : outs) {
      parts.push_back(test::store_as(rng.floats(static_cast<std::size_t>(out * k)), type));
      biases.push_back(rng.floats(static_cast<std::size_t>(out)));
    }
    for (std::size_t i = 0; i < outs.size(); ++i) {
      tensors.push_back({"part" + std::to_string(i), type, {outs[i], k}, parts[i].bytes.data()});
      bias_tensors.push_back({"bias" + std::to_string(i), dtype::f32, {outs[i]}, biases[i].data()});
    }
  }
  std::int64_t n() const {
    std::int64_t total = 0;
    for (const host_tensor& t : tensors) total += t.shape[0];
    return total;
  }
  /// Weight row j and its bias, as exact floats.
  std::pair<const float*, float> row(std::int64_t j) const {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (j < tensors[i].shape[0]) return {parts[i].exact.data() + j * k, biases[i][static_cast<std::size_t>(j)]};
      j -= tensors[i].shape[0];
    }
    return {nullptr, 0.0f};
  }
};

/// linear() of `rows` ([m][k] values) and its output rows.
std::vector<float> run_linear(backend& b, const linear_weight& w, const std::vector<float>& rows, std::int64_t m) {
  const std::int64_t k = w.in_features(), n = w.out_features();
  padded_matrix x(b, m, k, 5), out(b, m, n, 3);
  x.fill(rows);
  out.poison_view();
  b.linear(x.view(), w, out.view());
  EXPECT_TRUE(out.padding_intact());
  return out.values();
}

/// Checks one output row against Σ x·w + b in double, within float rounding of Σ|x·w| + |b|.
void expect_matches_reference(const stacked_weight& w, const std::vector<float>& x, const float* got, bool round_x) {
  for (std::int64_t j = 0; j < w.n(); ++j) {
    const auto [row, bias] = w.row(j);
    double sum = bias, bound = std::abs(bias);
    for (std::int64_t kk = 0; kk < w.k; ++kk) {
      const float xv = round_x ? test::round_to_bf16(x[static_cast<std::size_t>(kk)]) : x[static_cast<std::size_t>(kk)];
      sum += static_cast<double>(xv) * row[kk];
      bound += std::abs(static_cast<double>(xv) * row[kk]);
    }
    ASSERT_LE(std::abs(got[j] - sum), 1e-5 * bound + 1e-30) << "output " << j;
  }
}

/// Where the probe rows sit among m rows: spread out, or at random places.
std::vector<std::int64_t> probe_positions(std::int64_t m, std::size_t probes, bool spread, random_source& rng) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(m));
  std::iota(all.begin(), all.end(), 0);
  if (!spread) std::shuffle(all.begin(), all.end(), rng.engine());
  std::vector<std::int64_t> positions;
  for (std::size_t p = 0; p < probes; ++p)
    positions.push_back(spread ? (m - 1) * static_cast<std::int64_t>(p) / static_cast<std::int64_t>(probes - 1)
                               : all[p]);
  return positions;
}

class InvariantLinearAtLevel : public ::testing::TestWithParam<cpu::isa_level> {};

// K = 2100 spans several K blocks with a partial vector at the end; N = 130
// leaves partial tiles and single weight rows at the end of a task.
TEST_P(InvariantLinearAtLevel, RowsAreBitwiseEqualForEveryRowCountAndPosition) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const cpu::isa_level level = GetParam();
  auto b = invariant_backend(level, 2);
  constexpr std::size_t probes = 3;
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const stacked_weight parts(rng, type, 2100, {100, 30});
    auto w = b->prepare_linear(parts.tensors, parts.bias_tensors);
    std::vector<std::vector<float>> probe_rows, alone;
    for (std::size_t p = 0; p < probes; ++p) {
      probe_rows.push_back(rng.floats(static_cast<std::size_t>(parts.k)));
      alone.push_back(run_linear(*b, *w, probe_rows.back(), 1));
      expect_matches_reference(parts, probe_rows.back(), alone.back().data(),
                               type == dtype::bf16 && level == cpu::isa_level::avx512_bf16);
    }
    for (std::int64_t m : {3, 16, 17, 64, 300}) {
      for (bool spread : {true, false}) {
        std::vector<float> x = rng.floats(static_cast<std::size_t>(m * parts.k));
        const std::vector<std::int64_t> at = probe_positions(m, probes, spread, rng);
        for (std::size_t p = 0; p < probes; ++p)
          std::copy(probe_rows[p].begin(), probe_rows[p].end(), x.begin() + at[p] * parts.k);
        const std::vector<float> out = run_linear(*b, *w, x, m);
        for (std::size_t p = 0; p < probes; ++p)
          ASSERT_EQ(std::memcmp(out.data() + at[p] * parts.n(), alone[p].data(), alone[p].size() * sizeof(float)), 0)
              << "m=" << m << " probe " << p << " at row " << at[p];
      }
    }
  }
}

// The same for weights quantised at load: the integer kernels quantise
// each activation row on its own, so a row's outputs must not depend on
// the rows beside it either (speculative verification and chunked prefill
// run a sequence's rows in batches of every size).
TEST_P(InvariantLinearAtLevel, QuantisedRowsAreBitwiseEqualForEveryRowCountAndPosition) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = invariant_backend(GetParam(), 2);
  constexpr std::size_t probes = 3;
  const stacked_weight parts(rng, dtype::f32, 1056, {100, 30});
  for (weight_quantization format : {weight_quantization::int8, weight_quantization::int4, weight_quantization::int6,
                                     weight_quantization::int4_g16}) {
    SCOPED_TRACE(std::string(quantization_name(format)));
    auto w = b->prepare_quantized_linear(parts.tensors, parts.bias_tensors, format);
    std::vector<std::vector<float>> probe_rows, alone;
    for (std::size_t p = 0; p < probes; ++p) {
      probe_rows.push_back(rng.floats(static_cast<std::size_t>(parts.k)));
      alone.push_back(run_linear(*b, *w, probe_rows.back(), 1));
    }
    for (std::int64_t m : {2, 3, 4, 5, 8, 16, 17, 64, 300}) {
      for (bool spread : {true, false}) {
        std::vector<float> x = rng.floats(static_cast<std::size_t>(m * parts.k));
        const std::vector<std::int64_t> at =
            probe_positions(m, probes > static_cast<std::size_t>(m) ? 2 : probes, spread, rng);
        for (std::size_t p = 0; p < at.size(); ++p)
          std::copy(probe_rows[p].begin(), probe_rows[p].end(), x.begin() + at[p] * parts.k);
        const std::vector<float> out = run_linear(*b, *w, x, m);
        for (std::size_t p = 0; p < at.size(); ++p)
          ASSERT_EQ(std::memcmp(out.data() + at[p] * parts.n(), alone[p].data(), alone[p].size() * sizeof(float)), 0)
              << "m=" << m << " probe " << p << " at row " << at[p];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, InvariantLinearAtLevel, ::testing::ValuesIn(test::supported_levels()),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

// The partition over threads (and the row blocks it makes) decides only who
// computes an element, never how: 1, 2 and 3 threads give the same bits,
// and so does a backend made through make_backend's options.
TEST(InvariantLinear, ThreadCountDoesNotChangeAnyBit) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const cpu::isa_level level = cpu::detected_isa();
  backend_options through_factory;
  through_factory.threads = 2;
  through_factory.batch_invariant = true;
  std::vector<std::unique_ptr<backend>> backends;
  backends.push_back(invariant_backend(level, 1));
  backends.push_back(invariant_backend(level, 3));
  backends.push_back(make_backend("cpu", through_factory));
  for (dtype type : {dtype::f32, dtype::bf16}) {
    const stacked_weight parts(rng, type, 1500, {77, 64});
    const std::vector<float> x = rng.floats(static_cast<std::size_t>(200 * parts.k));
    std::vector<float> first;
    for (const auto& b : backends) {
      auto w = b->prepare_linear(parts.tensors, parts.bias_tensors);
      for (std::int64_t m : {std::int64_t{200}, std::int64_t{9}}) {
        const std::vector<float> rows(x.begin(), x.begin() + m * parts.k);
        const std::vector<float> out = run_linear(*b, *w, rows, m);
        if (m == 200 && first.empty()) first = out;
        ASSERT_EQ(std::memcmp(out.data(), first.data(), out.size() * sizeof(float)), 0)
            << dtype_name(type) << " m=" << m;
      }
    }
  }
}

}  // namespace
}  // namespace troupe
