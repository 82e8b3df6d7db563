// The tied 4-bit LM head's rescoring on the device (backend::refine_logits)
// against the CPU's row function: the same candidates (the largest logits,
// the lower id among equal ones, NaN below every number), each become its
// exact dot product, and every other logit keeps its bits. Rows whose best
// logits crowd one thread's slice of the row, ties across the threshold,
// NaNs and signed zeros, strides, and one candidate up to the whole row.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>

#include "kernels/cpu/logit_refinement.hpp"
#include "kernels/cuda/logit_refinement.hpp"
#include "kernels/dtype.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace troupe::gpu_test {
namespace {

using LogitRefinement = cuda_fixture;

/// One refinement: rows × vocab logits from `fill` (row, id, rng) over a
/// bf16 x [rows][hidden] and table [vocab][hidden].
struct refinement_shape {
  std::int64_t rows = 1, vocab = 1, hidden = 1;
  int candidates = 1;
  std::int64_t x_padding = 0, logits_padding = 0;  ///< extra elements a row, to test strides
};

using logit_fill = std::function<float(std::int64_t row, std::int64_t id, std::mt19937_64& rng)>;

float normal_logit(std::int64_t, std::int64_t, std::mt19937_64& rng) {
  return std::normal_distribution<float>(0.0f, 3.0f)(rng);
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Runs the case on the device and checks every row against the CPU's
/// choice of candidates and the exact dot products in double.
void check_refinement(backend& gpu, const refinement_shape& shape, const logit_fill& fill) {
  SCOPED_TRACE(std::to_string(shape.rows) + " rows of " + std::to_string(shape.vocab) + ", hidden " +
               std::to_string(shape.hidden) + ", " + std::to_string(shape.candidates) + " candidates");
  auto rng = fresh_rng();
  const auto x_bits = random_half_bits(rng, static_cast<std::size_t>(shape.rows * shape.hidden), 1.0f, dtype::bf16);
  const auto table_bits =
      random_half_bits(rng, static_cast<std::size_t>(shape.vocab * shape.hidden), 1.0f, dtype::bf16);
  std::vector<float> logits(static_cast<std::size_t>(shape.rows * shape.vocab));
  for (std::int64_t r = 0; r < shape.rows; ++r)
    for (std::int64_t v = 0; v < shape.vocab; ++v)
      logits[static_cast<std::size_t>(r * shape.vocab + v)] = fill(r, v, rng);

  const device_matrix x = upload_matrix(
      gpu, {.type = dtype::bf16, .rows = shape.rows, .cols = shape.hidden, .stride = shape.hidden + shape.x_padding},
      x_bits.data());
  const device_matrix table =
      upload_matrix(gpu, {.type = dtype::bf16, .rows = shape.vocab, .cols = shape.hidden}, table_bits.data());
  const device_matrix out = upload_matrix(
      gpu, {.type = dtype::f32, .rows = shape.rows, .cols = shape.vocab, .stride = shape.vocab + shape.logits_padding},
      logits.data());
  gpu.refine_logits(x.view, table.view, shape.candidates, out.view);
  const std::vector<float> got = download_floats(gpu, out.view);

  std::vector<float> table_values(table_bits.size());
  for (std::size_t i = 0; i < table_bits.size(); ++i) table_values[i] = bf16_to_float(table_bits[i]);
  for (std::int64_t r = 0; r < shape.rows; ++r) {
    std::vector<float> x_row(static_cast<std::size_t>(shape.hidden));
    for (std::int64_t k = 0; k < shape.hidden; ++k)
      x_row[static_cast<std::size_t>(k)] = bf16_to_float(x_bits[static_cast<std::size_t>(r * shape.hidden + k)]);
    std::vector<float> row(logits.begin() + r * shape.vocab, logits.begin() + (r + 1) * shape.vocab);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(shape.candidates));
    std::vector<float> scratch(ids.size());
    cpu::refine_logit_row(x_row.data(), table_values.data(), dtype::f32, shape.hidden, shape.hidden, shape.vocab,
                          shape.candidates, row.data(), ids.data(), scratch.data());
    std::vector<bool> candidate(static_cast<std::size_t>(shape.vocab), false);
    std::vector<float> got_candidates;
    std::vector<double> exact;
    for (std::int32_t id : ids) {
      candidate[static_cast<std::size_t>(id)] = true;
      double sum = 0.0;
      for (std::int64_t k = 0; k < shape.hidden; ++k)
        sum += static_cast<double>(x_row[static_cast<std::size_t>(k)]) *
               table_values[static_cast<std::size_t>(id * shape.hidden + k)];
      exact.push_back(sum);
      got_candidates.push_back(got[static_cast<std::size_t>(r * shape.vocab + id)]);
    }
    EXPECT_TRUE(all_close(got_candidates, exact, f32_rtol)) << "row " << r << ": the candidates' dot products";
    std::int64_t moved = 0;
    for (std::int64_t v = 0; v < shape.vocab; ++v) {
      const auto i = static_cast<std::size_t>(r * shape.vocab + v);
      if (!candidate[static_cast<std::size_t>(v)] && !same_bits(got[i], logits[i])) ++moved;
    }
    EXPECT_EQ(moved, 0) << "row " << r << ": logits of ids that are not the CPU's candidates changed";
  }
}

TEST_F(LogitRefinement, TheLargestLogitsBecomeExactAsOnTheCpu) {
  const std::int64_t vocab = quick_mode() ? 5000 : 128256, hidden = quick_mode() ? 128 : 2048;
  check_refinement(gpu(), {.rows = 3, .vocab = vocab, .hidden = hidden, .candidates = 64}, normal_logit);
  check_refinement(gpu(),
                   {.rows = 2, .vocab = 3001, .hidden = 96, .candidates = 64, .x_padding = 8, .logits_padding = 3},
                   normal_logit);
}

TEST_F(LogitRefinement, OneCandidateAndTheWholeRow) {
  check_refinement(gpu(), {.rows = 2, .vocab = 1000, .hidden = 64, .candidates = 1}, normal_logit);
  check_refinement(gpu(), {.rows = 2, .vocab = 70, .hidden = 40, .candidates = 70}, normal_logit);
}

// The kernel keeps each thread's best eight of its slice (ids equal modulo
// the block's 256 threads) and rescans the slice when all were taken: here
// the 64 best logits all lie in one slice.
TEST_F(LogitRefinement, BestLogitsInOneThreadsSlice) {
  check_refinement(gpu(), {.rows = 2, .vocab = 256 * 80 + 17, .hidden = 64, .candidates = 64},
                   [](std::int64_t row, std::int64_t id, std::mt19937_64& rng) {
                     const float noise = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
                     return id % 256 == 5 + row ? 100.0f + noise : noise;
                   });
}

// More logits equal to the 64th largest than places left: the lower ids win.
TEST_F(LogitRefinement, TiesAtTheThresholdKeepTheLowerIds) {
  check_refinement(gpu(), {.rows = 2, .vocab = 4000, .hidden = 32, .candidates = 64},
                   [](std::int64_t, std::int64_t id, std::mt19937_64& rng) {
                     if (id % 13 == 0) return 1.0f;  // 308 ties
                     if (id % 97 == 5)
                       return 2.0f + std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);  // 41 above
                     return std::uniform_real_distribution<float>(-1.0f, 0.5f)(rng);
                   });
}

// NaNs rank below every number, −inf included, and among themselves the
// lower id first; −0 and +0 are equal (the lower id first).
TEST_F(LogitRefinement, NansRankLastAndSignedZerosAreEqual) {
  check_refinement(gpu(), {.rows = 2, .vocab = 600, .hidden = 32, .candidates = 16},
                   [](std::int64_t, std::int64_t id, std::mt19937_64&) {
                     if (id % 5 == 0) return std::numeric_limits<float>::quiet_NaN();
                     if (id % 7 == 0) return -1.0f;
                     return id % 2 == 0 ? -0.0f : 0.0f;
                   });
  // Fewer numbers than candidates: the NaNs of the lowest ids fill the rest.
  check_refinement(gpu(), {.rows = 1, .vocab = 300, .hidden = 32, .candidates = 16},
                   [](std::int64_t, std::int64_t id, std::mt19937_64&) {
                     if (id == 250) return -std::numeric_limits<float>::infinity();
                     if (id % 40 == 7) return static_cast<float>(id);
                     return id % 2 == 0 ? std::numeric_limits<float>::quiet_NaN()
                                        : -std::numeric_limits<float>::quiet_NaN();
                   });
}

TEST_F(LogitRefinement, RefusesWhatItCannotRescore) {
  ASSERT_TRUE(gpu().supports_logit_refinement());
  const std::int64_t vocab = 2000, hidden = 16;
  const device_matrix x = poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = 1, .cols = hidden});
  const device_matrix table = poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = vocab, .cols = hidden});
  const device_matrix f32_table = poisoned_matrix(gpu(), {.type = dtype::f32, .rows = vocab, .cols = hidden});
  const device_matrix logits = poisoned_matrix(gpu(), {.type = dtype::f32, .rows = 1, .cols = vocab});
  EXPECT_THROW(gpu().refine_logits(x.view, table.view, 0, logits.view), std::invalid_argument);
  EXPECT_THROW(gpu().refine_logits(x.view, table.view, cuda::max_refined_candidates + 1, logits.view),
               std::invalid_argument);
  EXPECT_THROW(gpu().refine_logits(x.view, f32_table.view, 8, logits.view), std::invalid_argument);
  EXPECT_THROW(gpu().refine_logits(x.view, table.view.row_slice(0, vocab - 1), 8, logits.view), std::invalid_argument);
}

}  // namespace
}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA
