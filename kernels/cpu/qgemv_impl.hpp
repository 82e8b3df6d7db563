#pragma once
// Quantised GEMV (up to 8 activation rows; more run the tiles of
// qgemm_impl.hpp): int8 activations (per group of 32, quantised on the fly
// by quantize_row_impl.hpp) times int8 (per output row), int4, int5 or
// int4_nl (per group of 32) or int6 / int4_g16 (per half group of 16)
// weights, integer dot products per group (int6, int4_g16: per half), f32
// accumulation across groups.
// Included only by the ISA units. Layouts: isa_kernels.hpp.
//
// Each 64-byte vector of a superblock carries 16 groups in its 32-bit lanes
// (4 bytes each), so the integer dot products of one group sum lane-wise
// over the superblock's 8 vectors and then meet their 16 scales as one vector.

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/quantize_row_impl.hpp"
#include "kernels/cpu/qvector_impl.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

constexpr std::int64_t groups_per_superblock = quant_superblock / quant_group;

// Defined here, in the ISA's namespace, rather than in isa_kernels.hpp, whose
// inline functions one ISA's unit could compile for the whole program.

/// Bytes of one row's codes per superblock: a byte a weight for int8, a
/// nibble for int4 / int4_asym, and for int5_asym (int6) the nibbles (as
/// int4) followed by a 64-byte (128-byte) plane of the codes' higher bits.
constexpr std::int64_t superblock_code_bytes(qformat format) {
  if (format == qformat::int8) return quant_superblock;
  if (format == qformat::int6) return quant_superblock / 2 + quant_superblock / 4;
  return quant_superblock / 2 + (format == qformat::int5_asym ? quant_superblock / 8 : 0);
}

/// True for the formats with an f16 offset per group (w = scale · code + offset).
constexpr bool has_group_offsets(qformat format) {
  return format == qformat::int4_asym || format == qformat::int5_asym;
}

/// True for the formats whose codes meet the activations as int8's bytes
/// (q + 128): int8 as stored, int4_nl once its nibbles are looked up in
/// int4_nl_biased_levels.
constexpr bool biased_byte_codes(qformat format) { return format == qformat::int8 || format == qformat::int4_nl; }

/// Calls fn.template operator()<F>() for the run-time `format`: the one
/// place a format picks its templated kernel.
template <class Fn>
[[gnu::always_inline]] inline void with_qformat(qformat format, Fn&& fn) {
  switch (format) {
    case qformat::int8:
      return fn.template operator()<qformat::int8>();
    case qformat::int4:
      return fn.template operator()<qformat::int4>();
    case qformat::int4_asym:
      return fn.template operator()<qformat::int4_asym>();
    case qformat::int5_asym:
      return fn.template operator()<qformat::int5_asym>();
    case qformat::int4_nl:
      return fn.template operator()<qformat::int4_nl>();
    case qformat::int6:
      return fn.template operator()<qformat::int6>();
    case qformat::int4_g16:
      return fn.template operator()<qformat::int4_g16>();
  }
}

/// The 4-, 5- or 6-bit code at interleaved position p (< 512) of a
/// superblock whose codes start at `superblock` (layout:
/// quantized_matrix::codes); for int4_nl the level's index.
inline int packed_code(const std::uint8_t* superblock, qformat format, std::int64_t p) {
  const int nibble = p < 256 ? superblock[p % 256] & 0x0f : superblock[p % 256] >> 4;
  if (format == qformat::int6)
    return nibble | ((superblock[quant_superblock / 2 + p % 128] >> (2 * (p / 128))) & 3) << 4;
  if (format != qformat::int5_asym) return nibble;
  return nibble | ((superblock[quant_superblock / 2 + p / 8] >> (p % 8)) & 1) << 4;
}

/// packed_code as the byte the kernels multiply: int4_nl's biased level
/// (int4_nl_biased_levels), the code itself for the other formats.
inline int byte_code(const std::uint8_t* superblock, qformat format, std::int64_t p) {
  const int code = packed_code(superblock, format, p);
  return format == qformat::int4_nl ? int4_nl_biased_levels[code] : code;
}

/// The scale of half `half` of int6 or int4_g16 group g: quantized_reference.cpp's
/// half_group_scale, in this ISA's namespace.
inline float scalar_half_group_scale(const quantized_matrix& w, std::int64_t g, int half) {
  const auto code = static_cast<std::int8_t>(w.scale_codes[half_scale_code_index(g, half)]);
  return half_to_float(w.block_scales[g / groups_per_factor_block]) * static_cast<float>(code);
}

/// Group g's scale (g counted over the matrix), block-factored or f16 as
/// `w` holds it: quantized_weights.cpp's group_scale, in this ISA's namespace.
inline float scalar_group_scale(const quantized_matrix& w, std::int64_t g) {
  if (w.block_scales == nullptr) return half_to_float(w.group_scales[g]);
  const int code =
      signed_scale_codes(w.format) ? static_cast<std::int8_t>(w.scale_codes[g]) : static_cast<int>(w.scale_codes[g]);
  return half_to_float(w.block_scales[g / groups_per_factor_block]) * static_cast<float>(code);
}

/// Group g's offset (formats with group offsets only), as scalar_group_scale.
inline float scalar_group_offset(const quantized_matrix& w, std::int64_t g) {
  if (w.block_offsets == nullptr) return half_to_float(w.group_offsets[g]);
  return half_to_float(w.block_offsets[g / groups_per_factor_block]) * static_cast<float>(w.offset_codes[g]);
}

#if defined(__AVX512VNNI__) || defined(__AVX2__)

constexpr int max_rows_per_pass = 8;

/// The scales of groups [g, g + lanes) of `w` (a matrix of format F; g
/// counted over the matrix, a multiple of lanes), block-factored or f16 as
/// `w` holds them; for int6 and int4_g16 the scales of their halves `Half`.
template <qformat F, int Half = 0>
[[gnu::always_inline]] inline qf group_scales_at(const quantized_matrix& w, std::int64_t g) {
  if constexpr (half_group_scales(F))
    return block_factored<true>(w.block_scales + g / groups_per_factor_block,
                                w.scale_codes + half_scale_code_index(g, Half));
  if (w.block_scales != nullptr)
    return block_factored<signed_scale_codes(F)>(w.block_scales + g / groups_per_factor_block, w.scale_codes + g);
  return load_halfs(w.group_scales + g);
}

/// The offsets of groups [g, g + lanes) (int4_asym, int5_asym), as group_scales_at.
[[gnu::always_inline]] inline qf group_offsets_at(const quantized_matrix& w, std::int64_t g) {
  if (w.block_offsets != nullptr)
    return block_factored<false>(w.block_offsets + g / groups_per_factor_block, w.offset_codes + g);
  return load_halfs(w.group_offsets + g);
}

/// −c · Σ codes of the activation groups [g0, g0 + lanes) of one row: where
/// a group's integer dot product starts, so that it comes out as Σ (w code −
/// c) · x code exactly. c is the biased bytes' 128 (int8, int4_nl) on the
/// unsigned dot, int4's 8, and 0 where the codes carry no offset (int4_asym,
/// int5_asym, biased bytes made signed on AVX2).
template <qformat F>
[[gnu::always_inline]] inline vi initial_dot(const std::int32_t* code_sums) {
  if constexpr (biased_byte_codes(F) && int8_dot_unsigned) return negated_shifted<7>(load_codes(code_sums));
  if constexpr (F == qformat::int4) return negated_shifted<3>(load_codes(code_sums));
  return int_zero();
}

/// One output of weight row `n` from its lane-wise sums: `acc` (the scaled
/// group dot products) and, for int4_asym / int5_asym, `offsets` (offset × the
/// activations' group sums). The tiled GEMM (qgemm_impl.hpp) finishes through
/// this too, so both give the same bits.
template <qformat F>
[[gnu::always_inline]] inline float finished_dot(const quantized_matrix& w, std::int64_t n, qf acc, qf offsets) {
  if constexpr (F == qformat::int8) return w.row_scales[n] * qsum(acc);
  if constexpr (!has_group_offsets(F)) return qsum(acc);
  return qsum(acc) + qsum(offsets);
}

/// finished_dot for four accumulators of weight row `n` at once (qsum4).
template <qformat F>
[[gnu::always_inline]] inline void finished_dots4(const quantized_matrix& w, std::int64_t n, const qf* acc,
                                                  const qf* offsets, float* out) {
  qsum4(acc, out);
  if constexpr (F == qformat::int8) {
    for (int j = 0; j < 4; ++j) out[j] = w.row_scales[n] * out[j];
  } else if constexpr (has_group_offsets(F)) {
    float offset_sums[4];
    qsum4(offsets, offset_sums);
    for (int j = 0; j < 4; ++j) out[j] += offset_sums[j];
  }
}

/// The codes of the eight vectors of superblock `sb` (half `h`) of a 4-, 5-
/// or 6-bit weight row starting at `row`, one byte each, into `wv`: packed
/// vector p holds vector p (low nibbles) and p + 4 (high); int5_asym adds
/// the fifth bits, int6 the fifth and sixth, int4_nl looks its levels up.
template <qformat F>
[[gnu::always_inline]] inline void unpack_codes(const std::uint8_t* row, std::int64_t sb, int h, vi* wv) {
  const std::uint8_t* superblock = row + sb * superblock_code_bytes(F);
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const vi packed = load_codes(superblock + h * vector_bytes + 64 * p);
    wv[p] = low_nibbles(packed);
    wv[p + 4] = high_nibbles(packed);
  }
  if constexpr (F == qformat::int5_asym) {
    const std::uint8_t* bits = superblock + quant_superblock / 2 + h * (vector_bytes / 8);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) wv[r] = with_fifth_bits(wv[r], bits + 8 * r);
  }
  if constexpr (F == qformat::int4_nl) {
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) wv[r] = biased_levels(wv[r]);
  }
  if constexpr (F == qformat::int6) {
    // Vector r's fifth and sixth bits: the plane's vector r % 2, bits 2 (r / 2) and up.
    const std::uint8_t* plane = superblock + quant_superblock / 2 + h * vector_bytes;
    const vi even = load_codes(plane), odd = load_codes(plane + 64);
    wv[0] = bytes_or(wv[0], high_code_bits<0>(even));
    wv[1] = bytes_or(wv[1], high_code_bits<0>(odd));
    wv[2] = bytes_or(wv[2], high_code_bits<1>(even));
    wv[3] = bytes_or(wv[3], high_code_bits<1>(odd));
    wv[4] = bytes_or(wv[4], high_code_bits<2>(even));
    wv[5] = bytes_or(wv[5], high_code_bits<2>(odd));
    wv[6] = bytes_or(wv[6], high_code_bits<3>(even));
    wv[7] = bytes_or(wv[7], high_code_bits<3>(odd));
  }
}

/// Where the integer sums of half groups [g, g + lanes) of a half-group
/// format start, from the activation row's half_starts at `starts`: −32 ·
/// Σ x codes for int6, a quarter of it for int4_g16 (code offset 8).
template <qformat F>
[[gnu::always_inline]] inline vi half_group_start(const std::int32_t* starts) {
  if constexpr (half_group_zero_code(F) == 32) {
    return load_codes(starts);
  } else {
    static_assert(half_group_zero_code(F) == 8, "half_starts hold −32 · Σ codes: a quarter of them for 8");
    return quartered(load_codes(starts));
  }
}

/// The integer dot products of one activation row with the unpacked
/// vectors `wv` of a superblock (half) of an int6 or int4_g16 row: vectors
/// 0-3 (each group's first 16 inputs) into `low`, 4-7 into `high`, each
/// started at its half's half_group_start (`starts`, the first halves'; the
/// second halves' `groups` on) so that it comes out as Σ (code − offset) ·
/// x code; two chains.
template <qformat F>
[[gnu::always_inline]] inline void half_group_dots(const vi* wv, const std::int8_t* xc, const std::int32_t* starts,
                                                   std::int64_t groups, vi& low, vi& high) {
  low = half_group_start<F>(starts);
  high = half_group_start<F>(starts + groups);
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    low = dot_nibbles(low, wv[r], load_codes(xc + 64 * r));
    high = dot_nibbles(high, wv[r + 4], load_codes(xc + 64 * (r + 4)));
  }
}

/// One output row `n` for activation rows [m0, m0 + mr): returns the dot
/// products through `result` (before bias).
template <qformat F, int MR>
[[gnu::always_inline]] inline void qgemv_row(const quantized_matrix& w, const quantized_rows& x, std::int64_t n,
                                             std::int64_t m0, float* result) {
  constexpr int mr = MR;
  const std::int64_t groups = w.padded_cols / quant_group, superblocks = w.padded_cols / quant_superblock;
  constexpr bool nibbles = F != qformat::int8;
  constexpr std::int64_t superblock_bytes = superblock_code_bytes(F);
  const std::uint8_t* codes = w.codes + n * superblocks * superblock_bytes;
  qf acc[max_rows_per_pass], offsets[max_rows_per_pass];
#pragma GCC unroll 8
  for (int i = 0; i < mr; ++i) acc[i] = offsets[i] = qzero();
  for (std::int64_t sb = 0; sb < superblocks; ++sb) {
    for (int h = 0; h < halves; ++h) {
      vi wv[8];
      if constexpr (nibbles) {
        unpack_codes<F>(codes, sb, h, wv);
      } else {
        const std::uint8_t* base = codes + sb * superblock_bytes + h * vector_bytes;
        for (int r = 0; r < 8; ++r) wv[r] = load_codes(base + 64 * r);
      }
      const std::int64_t g0 = sb * groups_per_superblock + h * lanes;
      if constexpr (half_group_scales(F)) {
        const qf low_scale = group_scales_at<F, 0>(w, n * groups + g0),
                 high_scale = group_scales_at<F, 1>(w, n * groups + g0);
#pragma GCC unroll 8
        for (int i = 0; i < mr; ++i) {
          vi low, high;
          half_group_dots<F>(wv, x.codes + (m0 + i) * x.padded_cols + sb * quant_superblock + h * vector_bytes,
                             x.half_starts + (m0 + i) * 2 * groups + g0, groups, low, high);
          const qf x_scale = qload(x.scales + (m0 + i) * groups + g0);
          acc[i] = qfma(to_float(low), qmul(x_scale, low_scale), acc[i]);
          acc[i] = qfma(to_float(high), qmul(x_scale, high_scale), acc[i]);
        }
        continue;
      }
      qf scale = qzero(), offset = qzero();
      if constexpr (nibbles) scale = group_scales_at<F>(w, n * groups + g0);
      if constexpr (has_group_offsets(F)) offset = group_offsets_at(w, n * groups + g0);
#pragma GCC unroll 8
      for (int i = 0; i < mr; ++i) {
        const std::int8_t* xc = x.codes + (m0 + i) * x.padded_cols + sb * quant_superblock + h * vector_bytes;
        // Two chains, so consecutive dot-product instructions do not wait on each other.
        vi dot = initial_dot<F>(x.code_sums + (m0 + i) * groups + g0), dot_odd = int_zero();
#pragma GCC unroll 4
        for (int r = 0; r < 8; r += 2) {
          dot = biased_byte_codes(F) ? dot_int8(dot, wv[r], load_codes(xc + 64 * r))
                                     : dot_nibbles(dot, wv[r], load_codes(xc + 64 * r));
          dot_odd = biased_byte_codes(F) ? dot_int8(dot_odd, wv[r + 1], load_codes(xc + 64 * (r + 1)))
                                         : dot_nibbles(dot_odd, wv[r + 1], load_codes(xc + 64 * (r + 1)));
        }
        dot = int_add(dot, dot_odd);
        const qf x_scale = qload(x.scales + (m0 + i) * groups + g0);
        acc[i] = qfma(to_float(dot), nibbles ? qmul(x_scale, scale) : x_scale, acc[i]);
        if constexpr (has_group_offsets(F))
          offsets[i] = qfma(offset, qload(x.sums + (m0 + i) * groups + g0), offsets[i]);
      }
    }
  }
  for (int i = 0; i < mr; ++i) result[i] = finished_dot<F>(w, n, acc[i], offsets[i]);
}

#else  // scalar

constexpr int max_rows_per_pass = 8;

inline int weight_code(const quantized_matrix& w, std::int64_t n, std::int64_t position) {
  if (w.format == qformat::int8) return static_cast<int>(w.codes[n * w.padded_cols + position]) - 128;
  const std::int64_t sb = position / quant_superblock, p = position % quant_superblock;
  const int code =
      byte_code(w.codes + (n * (w.padded_cols / quant_superblock) + sb) * superblock_code_bytes(w.format), w.format, p);
  return w.format == qformat::int4_nl ? code - 128 : code;
}

template <qformat F, int MR>
inline void qgemv_row(const quantized_matrix& w, const quantized_rows& x, std::int64_t n, std::int64_t m0,
                      float* result) {
  constexpr int mr = MR;
  const std::int64_t groups = w.padded_cols / quant_group;
  for (int i = 0; i < mr; ++i) {
    const std::int8_t* xc = x.codes + (m0 + i) * x.padded_cols;
    float acc = 0.0f, offsets = 0.0f;
    for (std::int64_t g = 0; g < groups; ++g) {
      // Group g of a superblock sits at lane g % 16 of each of its 8 vectors.
      const std::int64_t base = g / groups_per_superblock * quant_superblock + 4 * (g % groups_per_superblock);
      const float x_scale = x.scales[(m0 + i) * groups + g];
      if constexpr (half_group_scales(F)) {
        // Vectors 0-3 hold the group's first 16 inputs; codes stand for code − 32 (int4_g16: − 8).
        constexpr int divisor = 32 / half_group_zero_code(F);  // half_starts hold −32 · Σ codes
        int halves[2] = {x.half_starts[(m0 + i) * 2 * groups + g] / divisor,
                         x.half_starts[(m0 + i) * 2 * groups + groups + g] / divisor};
        for (int r = 0; r < 8; ++r) {
          for (int t = 0; t < 4; ++t) halves[r / 4] += weight_code(w, n, base + 64 * r + t) * xc[base + 64 * r + t];
        }
        for (int half = 0; half < 2; ++half)
          acc += static_cast<float>(halves[half]) * (x_scale * scalar_half_group_scale(w, n * groups + g, half));
        continue;
      }
      int dot = 0;
      for (int r = 0; r < 8; ++r) {
        for (int t = 0; t < 4; ++t) dot += weight_code(w, n, base + 64 * r + t) * xc[base + 64 * r + t];
      }
      if constexpr (F == qformat::int4) dot -= 8 * x.code_sums[(m0 + i) * groups + g];  // codes stand for code − 8
      if constexpr (F == qformat::int8) {
        acc += static_cast<float>(dot) * x_scale;
      } else {
        acc += static_cast<float>(dot) * (x_scale * scalar_group_scale(w, n * groups + g));
        if constexpr (has_group_offsets(F))
          offsets += scalar_group_offset(w, n * groups + g) * x.sums[(m0 + i) * groups + g];
      }
    }
    result[i] = F == qformat::int8 ? w.row_scales[n] * acc : acc + offsets;
  }
}

#endif

/// The 512 codes of superblock `sb` of a 4-, 5- or 6-bit weight row starting at
/// `row` as one byte each in interleaved order (int4_nl's biased levels):
/// unpack_codes' vectors stored, where the ISA has vectors.
template <qformat F>
inline void expand_superblock_codes(const std::uint8_t* row, std::int64_t sb, std::uint8_t* out) {
#if defined(__AVX512VNNI__) || defined(__AVX2__)
  for (int h = 0; h < halves; ++h) {
    vi wv[8];
    unpack_codes<F>(row, sb, h, wv);
    for (int r = 0; r < 8; ++r) store_codes(out + h * vector_bytes + 64 * r, wv[r]);
  }
#else
  const std::uint8_t* superblock = row + sb * superblock_code_bytes(F);
  for (int p = 0; p < quant_superblock; ++p) out[p] = static_cast<std::uint8_t>(byte_code(superblock, F, p));
#endif
}

/// Output rows [n_begin, n_end) for the MR activation rows from m0.
template <qformat F, int MR>
void qgemv_pass(const qgemv_args& args, std::int64_t m0, std::int64_t n_begin, std::int64_t n_end) {
  float result[MR];
  for (std::int64_t n = n_begin; n < n_end; ++n) {
    qgemv_row<F, MR>(*args.weights, *args.x, n, m0, result);
    const float bias = args.bias != nullptr ? args.bias[n] : 0.0f;
    for (int i = 0; i < MR; ++i) args.out[(m0 + i) * args.out_stride + n] = result[i] + bias;
  }
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
