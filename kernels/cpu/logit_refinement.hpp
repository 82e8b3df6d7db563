#pragma once
// Exact rescoring of a 4-bit LM head's best candidates. A 4-bit head reads a
// quarter of the bytes of a bf16 one (on the `1b` shape 0.15 GB a step
// against 0.26 for int8), but its logit error flips close top-1 calls. When
// the head is tied to the embeddings, the exact rows are in memory anyway
// (the embedding gather reads them), so the few candidates that can win are
// recomputed from them: greedy choices and the top of every distribution
// are then those of the exact head, for a few microseconds a row.

#include <cstdint>

#include "kernels/dtype.hpp"

namespace troupe::cpu {

/// Overwrites the `candidates` largest entries of `logits` [vocab] (ties: the
/// lower id first; NaN below every number) with the exact dot product of `x` [hidden] (f32) and row v
/// of `table` ([vocab][hidden] of `table_type`, rows `table_stride` elements
/// apart), accumulated in f32. Every other entry is left as it is.
/// `candidates` in [1, vocab]; `ids` and `values` hold `candidates` entries
/// of scratch, `ids` the candidates' ids on return.
void refine_logit_row(const float* x, const void* table, dtype table_type, std::int64_t table_stride,
                      std::int64_t hidden, std::int64_t vocab, int candidates, float* logits, std::int32_t* ids,
                      float* values);

}  // namespace troupe::cpu
