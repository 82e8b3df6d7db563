#pragma once
// Exact rescoring of a lossy LM head's best candidates on the device, as the
// CPU backend does (kernels/cpu/logit_refinement.hpp): the head tied to the
// embeddings, each logits row's `candidates` largest entries are recomputed
// from the embedding rows, so greedy choices and the top of every
// distribution are the exact head's while the head itself reads 4-bit codes.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace troupe::cuda {

/// The most candidates a row may rescore (they are kept in shared memory).
inline constexpr int max_refined_candidates = 1024;

/// One launch: every row of `logits` rescored in place.
struct refine_logits_params {
  const void* x = nullptr;  ///< [rows][hidden] bf16, rows `x_stride` elements apart
  std::int64_t x_stride = 0;
  const void* table = nullptr;  ///< [vocab][hidden] bf16 (the embeddings), rows `table_stride` apart
  std::int64_t table_stride = 0;
  float* logits = nullptr;  ///< [rows][vocab] f32, rows `logits_stride` apart
  std::int64_t logits_stride = 0;
  std::int64_t rows = 0, hidden = 0, vocab = 0;
  int candidates = 0;  ///< in [1, min(vocab, max_refined_candidates)] (checked on the host)
};

/// Enqueues the rescoring on `stream`: in each row the `candidates` largest
/// logits (ties: the lower id first; NaN below every number) become the dot
/// product of the row of x and the id's table row, accumulated in f32;
/// every other logit keeps its bits.
void launch_refine_logits(const refine_logits_params& params, cudaStream_t stream);

}  // namespace troupe::cuda
