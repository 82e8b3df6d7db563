// Linear weights whose checkpoint expands them on demand (host_tensor::rows,
// kernels/row_source.hpp): prepared quantised, the backend reads them a row
// block at a time and gives the same weight as from the values in memory;
// prepared unquantised (mapped placement included, where a weight in memory
// would stay a view) it expands them into its own storage.

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/row_source.hpp"
#include "tests/kernels/cpu_test_support.hpp"

namespace troupe {
namespace {

using test::random_source;
using test::run_linear;

// Rows of a matrix held as floats, counting the rows it was asked for.
class counting_source final : public row_source {
 public:
  counting_source(std::vector<float> values, std::int64_t cols) : values_(std::move(values)), cols_(cols) {}
  void read_rows(std::int64_t first, std::int64_t count, float* out) const override {
    std::copy_n(values_.begin() + first * cols_, count * cols_, out);
    rows_read_ += count;
  }
  std::int64_t rows_read() const { return rows_read_; }

 private:
  std::vector<float> values_;
  std::int64_t cols_;
  mutable std::atomic<std::int64_t> rows_read_{0};
};

struct two_parts {
  std::vector<host_tensor> in_memory, streamed;
  std::vector<std::shared_ptr<counting_source>> sources;
  std::vector<test::stored_values> values;
};

// q/k-like parts of `rows` outputs each over k inputs, as bf16 in memory and
// as sources of the same (bf16-exact) floats.
two_parts make_parts(random_source& rng, std::int64_t rows, std::int64_t k) {
  two_parts out;
  for (int i = 0; i < 2; ++i)
    out.values.push_back(test::store_as(rng.floats(static_cast<std::size_t>(rows * k)), dtype::bf16));
  for (int i = 0; i < 2; ++i) {
    const std::string name = "part" + std::to_string(i);
    out.in_memory.push_back({name, dtype::bf16, {rows, k}, out.values[i].bytes.data()});
    out.sources.push_back(std::make_shared<counting_source>(out.values[i].exact, k));
    host_tensor streamed{name, dtype::bf16, {rows, k}, nullptr};
    streamed.rows = out.sources.back();
    out.streamed.push_back(std::move(streamed));
  }
  return out;
}

TEST(RowSource, QuantisedFromRowBlocksEqualsFromMemory) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 256, rows = 200, m = 3;  // 200 rows: three full 64-row tasks and a partial one
  const two_parts parts = make_parts(rng, rows, k);
  auto device = test::make_backend_at(cpu::detected_isa());
  const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * k), -2.0f, 2.0f);
  for (const auto format : {weight_quantization::int8, weight_quantization::int4, weight_quantization::int4_asym}) {
    const auto expected = device->prepare_quantized_linear(parts.in_memory, {}, format);
    const auto streamed = device->prepare_quantized_linear(parts.streamed, {}, format);
    EXPECT_EQ(run_linear(*device, *streamed, x, m, k), run_linear(*device, *expected, x, m, k))
        << quantization_name(format);
  }
  for (const auto& source : parts.sources) EXPECT_EQ(source->rows_read(), 3 * rows);  // each row once a format
}

// Under mapped placement a single bf16 part in memory stays a view (and
// runs row-major); a streamed one is expanded into the weight's own storage
// and packed as under copy placement, so both compare with copy's weight.
TEST(RowSource, UnquantisedExpandsIntoItsOwnStorageEvenWhenMapped) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 256, rows = 96, m = 2;
  const two_parts parts = make_parts(rng, rows, k);
  const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * k), -2.0f, 2.0f);
  const auto device_with = [](cpu::weight_placement placement) {
    cpu::cpu_backend_options options;
    options.threads = 2;
    options.weights = placement;
    return cpu::make_cpu_backend(options);
  };
  const auto reference = device_with(cpu::weight_placement::copy);
  const auto one = reference->prepare_linear({&parts.in_memory[0], 1}, {});
  const auto both = reference->prepare_linear(parts.in_memory, {});
  const std::vector<float> expected_one = run_linear(*reference, *one, x, m, k);
  const std::vector<float> expected_both = run_linear(*reference, *both, x, m, k);
  for (const auto placement : {cpu::weight_placement::copy, cpu::weight_placement::mapped}) {
    const auto device = device_with(placement);
    const auto streamed_one = device->prepare_linear({&parts.streamed[0], 1}, {});
    const auto streamed_both = device->prepare_linear(parts.streamed, {});
    EXPECT_EQ(run_linear(*device, *streamed_one, x, m, k), expected_one);
    EXPECT_EQ(run_linear(*device, *streamed_both, x, m, k), expected_both);
  }
}

TEST(RowSource, APartWithNeitherDataNorASourceIsRefused) {
  const host_tensor empty{"w", dtype::bf16, {4, 32}, nullptr};
  auto device = test::make_backend_at(cpu::detected_isa());
  EXPECT_THROW(device->prepare_quantized_linear({&empty, 1}, {}, weight_quantization::int8), std::invalid_argument);
  EXPECT_THROW(device->prepare_linear({&empty, 1}, {}), std::invalid_argument);
}

}  // namespace
}  // namespace troupe
