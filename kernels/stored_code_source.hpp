#pragma once
// A linear weight that its checkpoint already stores as 4-bit (or 5-bit)
// codes in groups of 32 inputs (GGUF Q4_0 / Q4_1 / Q4_K, AWQ, GPTQ; GGUF
// Q5_0 / Q5_1 / Q5_K; GGUF IQ4_NL / IQ4_XS), or as 6-bit codes in groups
// of 16 under a factor per 256 (GGUF Q6_K, int6; GGUF Q3_K's 3-bit codes as
// int4_g16): the loader hands the
// backend this reader instead of float data, and the backend repacks the
// codes and scales into its own layout a few rows at a time, so nothing is
// expanded to floats and no precision is lost. GPTQ act-order checkpoints
// group inputs out of order: their source reads the columns permuted so the
// groups are contiguous, and the backend permutes the activations to match.

#include <cstdint>
#include <span>
#include <stdexcept>

#include "kernels/quantization.hpp"

namespace troupe {

/// Reads the 4-bit form of one [rows][cols] matrix (cols a multiple of 32).
class stored_code_source {
 public:
  virtual ~stored_code_source() = default;

  /// int4: w = scale · (code − 8); int4_asym and int5_asym (5-bit codes,
  /// GGUF Q5_0 / Q5_1 / Q5_K): w = scale · code + offset; int4_nl (GGUF
  /// IQ4_NL / IQ4_XS): w = scale · int4_nl_levels[code]; int6 (GGUF Q6_K):
  /// w = scale · (code − 32), and int4_g16 (GGUF Q3_K): w = scale · (code −
  /// 8), a scale per 16 inputs, read only through read_codes and
  /// read_block_factors.
  virtual weight_quantization format() const = 0;

  /// Writes rows [first, first + count) of the matrix: `codes` [count][cols]
  /// (0..15, or 0..31 for int5_asym, one per byte, in input order), `scales`
  /// [count][cols / 32] and, for int4_asym / int5_asym, `offsets`
  /// [count][cols / 32] (f16 bits; untouched for int4 and int4_nl). An int6
  /// or int4_g16 source, whose scales are per 16 inputs, throws
  /// std::logic_error.
  virtual void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                         std::uint16_t* offsets) const = 0;

  /// True where the checkpoint stores each group's scale (and offset) as
  /// a small integer under a factor shared by 8 groups (GGUF Q4_K / Q5_K:
  /// d · s and −dmin · m; IQ4_XS: d · (s − 32)) or, for int6 and int4_g16,
  /// by 16 groups of 16 (GGUF Q6_K: d · s; Q3_K: d · (s − 32));
  /// read_block_factors then gives them exactly, where read_rows rounds each
  /// product to f16. Always true for int6 and int4_g16.
  virtual bool has_block_factors() const { return false; }

  /// Rows [first, first + count) of the factors of read_rows' scales and
  /// offsets: group g of a row has scale block_scales[g / 8] · scale_codes[g]
  /// and offset block_offsets[g / 8] · offset_codes[g] (f32 products, exact).
  /// `block_scales`, `block_offsets` f16 [count][cols / 256]; `scale_codes`,
  /// `offset_codes` [count][cols / 32], u8 for int4_asym / int5_asym and
  /// s8 (two's complement) for int4 / int4_nl, whose offsets are untouched.
  /// int6, int4_g16: `scale_codes` s8 [count][cols / 16], the scale of inputs
  /// [16 h, 16 h + 16) of a row block_scales[h / 16] · scale_codes[h].
  /// Throws std::logic_error unless has_block_factors(). (Inline, so that
  /// the class keeps no key function and every library that reads a source
  /// needs no further object.)
  virtual void read_block_factors(std::int64_t /*first*/, std::int64_t /*count*/, std::uint16_t* /*block_scales*/,
                                  std::uint16_t* /*block_offsets*/, std::uint8_t* /*scale_codes*/,
                                  std::uint8_t* /*offset_codes*/) const {
    throw std::logic_error("read_block_factors: this source stores no block factors");
  }

  /// Rows [first, first + count) of the codes alone, as read_rows writes
  /// them: what a layout holding the block factors reads, without read_rows'
  /// f16 products (nor its refusal of a block whose products leave f16's
  /// range). Throws std::logic_error unless has_block_factors() (inline, as
  /// read_block_factors).
  virtual void read_codes(std::int64_t /*first*/, std::int64_t /*count*/, std::uint8_t* /*codes*/) const {
    throw std::logic_error("read_codes: this source stores no block factors");
  }

  /// The input order of read_rows' columns: column j is input feature P[j]
  /// of the matrix (a permutation of 0..cols-1, so x · W^T = x[:, P] · W[:, P]^T);
  /// empty when column j is input j.
  virtual std::span<const std::int32_t> input_permutation() const { return {}; }
};

/// Inputs per group of a stored_code_source.
inline constexpr std::int64_t stored_code_group = 32;

/// Inputs per block of a stored_code_source's block factors (8 groups).
inline constexpr std::int64_t stored_code_factor_block = 256;

/// Inputs per scale of an int6 or int4_g16 source (GGUF Q6_K, Q3_K): 16
/// scales a factor block.
inline constexpr std::int64_t half_scale_group = 16;

/// Rows [first, first + count) of `source`, a matrix of `cols` inputs, as
/// f32 [count][cols] with every weight at its natural input position
/// (input_permutation undone): scale · code + offset, offset −8 · scale for
/// int4; scale · int4_nl_levels[code] for int4_nl; for int6 (int4_g16) its
/// factor products (read_codes, read_block_factors) · (code − 32 (8)).
void decode_stored_code_rows(const stored_code_source& source, std::int64_t first, std::int64_t count,
                             std::int64_t cols, float* out);

}  // namespace troupe
