#pragma once
// How quantised codes are written into a layout's rows, shared by the
// packing of stored codes (quantized_weights.cpp) and the round-to-nearest
// quantisers (round_to_nearest.cpp). Internal to kernels/cpu.

#include <cstdint>

#include "kernels/cpu/quantized_weights.hpp"

namespace troupe::cpu {

/// True for the 4-, 5- and 6-bit formats (codes packed in nibbles), false for int8.
inline bool nibble_codes(weight_quantization format) { return format != weight_quantization::int8; }

/// Bytes of one row's codes per superblock of 512 inputs (isa_kernels.hpp,
/// quantized_matrix::codes).
std::int64_t superblock_bytes(weight_quantization format);

/// The 32 codes of inputs [first_k, first_k + 32) (first_k a multiple of
/// 32; one code a byte: int8 q + 128, int4 0..15, int5_asym 0..31, int6 0..63, int4_g16 0..15) into
/// `row`, the row's codes in `layout`.
void store_group(const std::uint8_t* codes, const quantized_layout& layout, std::int64_t first_k, std::uint8_t* row);

}  // namespace troupe::cpu
