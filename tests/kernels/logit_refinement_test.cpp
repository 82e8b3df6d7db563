// The tied 4-bit LM head's logit refinement: the largest logits of a row,
// and only they, become exact dot products with the embedding rows.

#include "kernels/cpu/logit_refinement.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "kernels/backend.hpp"
#include "tests/kernels/cpu_test_support.hpp"

namespace troupe {
namespace {

using test::random_source;

// A [vocab][hidden] table stored in `type`, x, and each row's exact logit
// in double from the stored values.
struct refinement_case {
  std::int64_t vocab = 0, hidden = 0;
  test::stored_values table;
  std::vector<float> x;
  std::vector<double> exact;
};

refinement_case make_case(random_source& rng, std::int64_t vocab, std::int64_t hidden, dtype type) {
  refinement_case c;
  c.vocab = vocab;
  c.hidden = hidden;
  c.table = test::store_as(rng.floats(static_cast<std::size_t>(vocab * hidden)), type);
  c.x = rng.floats(static_cast<std::size_t>(hidden));
  for (std::int64_t v = 0; v < vocab; ++v) {
    double sum = 0;
    for (std::int64_t k = 0; k < hidden; ++k)
      sum += static_cast<double>(c.x[static_cast<std::size_t>(k)]) *
             c.table.exact[static_cast<std::size_t>(v * hidden + k)];
    c.exact.push_back(sum);
  }
  return c;
}

// The ids of the `count` largest values, the lower id first among equals.
std::vector<std::int32_t> largest_ids(const std::vector<float>& values, int count) {
  std::vector<std::int32_t> ids(values.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) { return values[a] > values[b]; });
  ids.resize(static_cast<std::size_t>(count));
  return ids;
}

void refine(const refinement_case& c, dtype type, int candidates, std::vector<float>& logits) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(candidates));
  std::vector<float> values(ids.size());
  cpu::refine_logit_row(c.x.data(), c.table.bytes.data(), type, c.hidden, c.hidden, c.vocab, candidates, logits.data(),
                        ids.data(), values.data());
}

TEST(LogitRefinement, TheLargestCandidatesBecomeExactAndNothingElseMoves) {
  random_source rng;
  for (dtype type : {dtype::bf16, dtype::f16, dtype::f32}) {
    for (std::int64_t hidden : {64, 75}) {  // 75: a tail past the 8-wide sums
      const refinement_case c = make_case(rng, 1000, hidden, type);
      // The approximate head: exact plus an error as large as the spread of
      // the top logits, so its candidates are not simply the exact top.
      std::vector<float> approximate(static_cast<std::size_t>(c.vocab));
      for (std::size_t v = 0; v < approximate.size(); ++v)
        approximate[v] = static_cast<float>(c.exact[v]) + rng.uniform(-1.0f, 1.0f);
      for (int candidates : {1, 16, 1000}) {
        std::vector<float> logits = approximate;
        refine(c, type, candidates, logits);
        const std::vector<std::int32_t> chosen = largest_ids(approximate, candidates);
        std::vector<bool> rescored(approximate.size(), false);
        for (std::int32_t id : chosen) rescored[static_cast<std::size_t>(id)] = true;
        for (std::size_t v = 0; v < logits.size(); ++v) {
          if (rescored[v])
            EXPECT_NEAR(logits[v], c.exact[v], 1e-5 * static_cast<double>(hidden)) << "id " << v;
          else
            EXPECT_EQ(logits[v], approximate[v]) << "id " << v << " was not a candidate";
        }
      }
    }
  }
}

TEST(LogitRefinement, EqualLogitsKeepTheLowerIdsAsCandidates) {
  random_source rng;
  const refinement_case c = make_case(rng, 100, 16, dtype::f32);
  std::vector<float> logits(100, 3.0f);
  logits[90] = 5.0f;  // a clear winner late in the row
  refine(c, dtype::f32, 8, logits);
  for (std::size_t v = 0; v < logits.size(); ++v) {
    const bool candidate = v == 90 || v < 7;
    if (candidate)
      EXPECT_NEAR(logits[v], c.exact[v], 1e-4) << "id " << v;
    else
      EXPECT_EQ(logits[v], 3.0f) << "id " << v;
  }
}

// A broken row's NaN logits must not take the places of numbers: before
// NaN ranked below everything, NaNs among the first ids blocked every later
// logit from becoming a candidate.
TEST(LogitRefinement, NanLogitsRankBelowEveryNumber) {
  random_source rng;
  const refinement_case c = make_case(rng, 200, 16, dtype::f32);
  std::vector<float> logits = rng.floats(200, -4.0f, 4.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t v : {0, 3, 7, 150}) logits[v] = nan;
  std::vector<float> numbers = logits;
  for (float& value : numbers) value = value != value ? -std::numeric_limits<float>::infinity() : value;
  const std::vector<float> before = logits;
  refine(c, dtype::f32, 8, logits);
  const std::vector<std::int32_t> chosen = largest_ids(numbers, 8);
  for (std::size_t v = 0; v < logits.size(); ++v) {
    if (std::find(chosen.begin(), chosen.end(), static_cast<std::int32_t>(v)) != chosen.end())
      EXPECT_NEAR(logits[v], c.exact[v], 1e-4) << "id " << v;
    else if (before[v] != before[v])
      EXPECT_TRUE(logits[v] != logits[v]) << "id " << v << " was NaN and not a candidate";
    else
      EXPECT_EQ(logits[v], before[v]) << "id " << v << " was not a candidate";
  }
}

TEST(LogitRefinement, TheCpuBackendRefinesEveryRowAsTheRowFunctionDoes) {
  random_source rng;
  const auto device = make_backend("cpu", backend_options{.threads = 2});
  ASSERT_TRUE(device->supports_logit_refinement());
  const std::int64_t vocab = 300, hidden = 32, rows = 5;
  const refinement_case c = make_case(rng, vocab, hidden, dtype::bf16);
  const std::vector<float> x = rng.floats(static_cast<std::size_t>(rows * hidden));
  const std::vector<float> approximate = rng.floats(static_cast<std::size_t>(rows * vocab), -4.0f, 4.0f);
  std::vector<float> got = approximate;
  std::vector<float> xs = x;
  const tensor_view x_view{xs.data(), dtype::f32, rows, hidden, hidden};
  const tensor_view table{const_cast<std::uint8_t*>(c.table.bytes.data()), dtype::bf16, vocab, hidden, hidden};
  const tensor_view logits{got.data(), dtype::f32, rows, vocab, vocab};
  device->refine_logits(x_view, table, 10, logits);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> expected(approximate.begin() + r * vocab, approximate.begin() + (r + 1) * vocab);
    std::vector<std::int32_t> ids(10);
    std::vector<float> values(10);
    cpu::refine_logit_row(x.data() + r * hidden, c.table.bytes.data(), dtype::bf16, hidden, hidden, vocab, 10,
                          expected.data(), ids.data(), values.data());
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), got.begin() + r * vocab)) << "row " << r;
  }
  EXPECT_THROW(device->refine_logits(x_view, table, 0, logits), std::invalid_argument);
  EXPECT_THROW(device->refine_logits(x_view, table, static_cast<int>(vocab) + 1, logits), std::invalid_argument);
  EXPECT_THROW(device->refine_logits(x_view.row_slice(0, 4), table, 10, logits), std::invalid_argument);
}

}  // namespace
}  // namespace troupe
