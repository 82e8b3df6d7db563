#pragma once
// Expansion of GGUF tensor data (plain floats and the block-quantised ggml
// formats Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
// IQ4_XS) to f32, following the block layouts ggml documents.

#include <cstddef>
#include <cstdint>

#include "model/gguf.hpp"

namespace troupe {

/// Writes `elements` floats to `out` from `data` holding them in `type`.
/// `elements` must be a whole number of the type's blocks; `data` needs no
/// alignment.
void gguf_dequantize(ggml_type type, const std::byte* data, float* out, std::uint64_t elements);

/// Sub-block `j` (0..7) of a Q4_K block: its 6-bit scale and min, unpacked
/// from the block's 12 bytes of them (`packed`).
void gguf_q4_k_scale_min(int j, const std::uint8_t* packed, std::uint8_t& scale, std::uint8_t& min);

/// Sub-block j's (0..7) scale multiplier s_j − 32 (−32..31) of the IQ4_XS
/// `block` (f16 d, then 16 bits of the scales' high bit pairs and 4 bytes of
/// their low nibbles): its weights are d · (s_j − 32) · level.
int gguf_iq4_xs_scale(const std::byte* block, int j);

/// Sub-block i's (0..15) scale multiplier s_i − 32 (−32..31) of a Q3_K
/// block, unpacked from its 12 bytes of 6-bit scales (`packed`): its
/// weights are d · (s_i − 32) · q.
int gguf_q3_k_scale(const std::uint8_t* packed, int i);

}  // namespace troupe
