#pragma once
// Projections that read one input and write one output side by side (q/k/v,
// gate/up), prepared as one linear; or, where their parts take different
// formats, as one linear per run of adjacent parts in the same format, each
// writing its own columns of the output. Built from the backend's own
// linears, so every backend runs a split stack unchanged.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.hpp"

namespace troupe {

/// A stack of projections prepared on one backend.
struct stacked_linear {
  struct piece {
    std::unique_ptr<linear_weight> weight;
    std::int64_t first_column = 0;  ///< where its outputs start in the stack's output
  };
  std::vector<piece> pieces;  ///< in part order, covering the output's columns
};

/// Prepares the [out, in] matrices `parts`, stacked in order, with `biases`
/// (one per part, or none), part i in `formats[i]`: one linear per run of
/// adjacent parts in the same format. Throws std::invalid_argument when
/// `parts` is empty or the counts disagree; the backend's errors otherwise.
stacked_linear prepare_stacked_linear(backend& device, std::span<const host_tensor> parts,
                                      std::span<const host_tensor> biases,
                                      std::span<const weight_quantization> formats);

/// out [rows][Σ parts' out] = x [rows][in] · stackᵀ, each piece into its own columns.
void run_stacked_linear(backend& device, tensor_view x, const stacked_linear& stack, tensor_view out);

}  // namespace troupe
