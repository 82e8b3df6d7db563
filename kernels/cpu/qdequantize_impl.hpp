#pragma once
// Quantised weight rows expanded to bf16 (isa_kernels::dequantize_rows): the
// onednn path's prefill panels read them. Included only by the ISA units.

#include "kernels/cpu/qgemv_impl.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

/// 16 (8 at AVX2) byte codes from `p` as floats.
inline vf load_codes_as_float(const std::uint8_t* p) {
#if defined(__AVX512F__)
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#elif defined(__AVX2__)
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
  return static_cast<float>(*p);
#endif
}

/// One weight row dequantised to bf16 in natural order (k < cols): scale ·
/// code + offset, with int8's and int4_nl's bytes biased by 128 (offset
/// −128 · scale), int4's and int4_g16's codes by 8 and int6's by 32.
template <qformat F>
inline void dequantize_row(const quantized_matrix& w, std::int64_t n, std::uint16_t* out) {
  const std::int64_t groups = w.padded_cols / quant_group;
  const std::uint8_t* codes = w.codes + n * (w.padded_cols / quant_superblock) * superblock_code_bytes(F);
  for (std::int64_t sb = 0; sb * quant_superblock < w.cols; ++sb) {
    // Scale and offset of each of a 64-byte vector's positions (lane = group);
    // int6's and int4_g16's for vectors 0-3 and 4-7 (their half groups).
    constexpr int halves_with_scales = half_group_scales(F) ? 2 : 1;
    float scale[halves_with_scales][64], offset[halves_with_scales][64];
    for (int half = 0; half < halves_with_scales; ++half) {
      for (int q = 0; q < 64; ++q) {
        const std::int64_t g = n * groups + sb * groups_per_superblock + q / 4;
        if constexpr (F == qformat::int8) {
          scale[half][q] = w.row_scales[n];
          offset[half][q] = -128.0f * w.row_scales[n];
        } else if constexpr (half_group_scales(F)) {
          scale[half][q] = scalar_half_group_scale(w, g, half);
          offset[half][q] = -static_cast<float>(half_group_zero_code(F)) * scale[half][q];
        } else {
          scale[half][q] = scalar_group_scale(w, g);
          const float zero_code = F == qformat::int4_nl ? 128.0f : 8.0f;
          offset[half][q] = has_group_offsets(F) ? scalar_group_offset(w, g) : -zero_code * scale[half][q];
        }
      }
    }
    alignas(64) std::uint8_t expanded[quant_superblock];
    const std::uint8_t* bytes = codes + sb * quant_superblock;  // int8: stored as bytes
    if constexpr (F != qformat::int8) {
      expand_superblock_codes<F>(codes, sb, expanded);
      bytes = expanded;
    }
    for (int r = 0; r < 8; ++r) {
      std::uint16_t values[64];
      for (int q = 0; q < 64; q += W)
        store_bf16(values + q, fma(load_codes_as_float(bytes + 64 * r + q), load(scale[r / 4 % halves_with_scales] + q),
                                   load(offset[r / 4 % halves_with_scales] + q)));
      // Lane j of vector r holds input features 32 j + 4 r .. + 3.
      for (int j = 0; j < 16; ++j) {
        const std::int64_t k = sb * quant_superblock + 32 * j + 4 * r;
        for (int t = 0; t < 4 && k + t < w.cols; ++t) out[k + t] = values[4 * j + t];
      }
    }
  }
}

inline void dequantize_rows(const quantized_matrix& w, std::int64_t row_begin, std::int64_t row_end,
                            std::uint16_t* out) {
  for (std::int64_t n = row_begin; n < row_end; ++n) {
    std::uint16_t* row = out + (n - row_begin) * w.cols;
    with_qformat(w.format, [&]<qformat F>() { dequantize_row<F>(w, n, row); });
  }
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
