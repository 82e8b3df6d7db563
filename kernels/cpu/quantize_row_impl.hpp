#pragma once
// Activation quantisation for the quantised GEMV / GEMM: one row to int8
// codes per group of 32 (symmetric, scale = amax / 127), the codes in the
// interleaved order of isa_kernels.hpp. Included only by qgemv_impl.hpp.
//
// The scalar loop (quantize_group) defines the results. The vector paths
// quantise as many groups at once as a vector has float lanes (16 groups, a
// whole superblock, with AVX-512; 8, half of one, with AVX2), each group's
// amax, scale and code sum in its own lane, and reach the same bits with the
// same float operations: max of |x|, 127 / amax, x · inverse rounded to nearest
// even (the conversion under the default rounding mode, as rintf), amax / 127.

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

/// Position of input feature `k` in the interleaved order (isa_kernels.hpp).
inline std::int64_t interleaved_position(std::int64_t k) {
  const std::int64_t within = k % quant_superblock;
  const std::int64_t group = within / quant_group, lane_byte = within % 4, vector = (within % quant_group) / 4;
  return k - within + 64 * vector + 4 * group + lane_byte;
}

/// Quantises group g of the row (inputs at or past `cols` are zeros): the
/// reference the vector paths match bit for bit.
inline void quantize_group(const float* x, std::int64_t cols, std::int64_t g, std::int64_t groups, std::int8_t* codes,
                           float* scales, float* sums, std::int32_t* code_sums, std::int32_t* half_starts) {
  float values[quant_group];
  float amax = 0.0f;
  for (std::int64_t t = 0; t < quant_group; ++t) {
    const std::int64_t k = g * quant_group + t;
    values[t] = k < cols ? x[k] : 0.0f;
    const float magnitude = values[t] < 0.0f ? -values[t] : values[t];
    amax = magnitude > amax ? magnitude : amax;
  }
  // 0 where 127 / amax overflows (0 < amax < 127 / FLT_MAX): such a group codes as zeros.
  const float quotient = amax > 0.0f ? 127.0f / amax : 0.0f;
  const float inverse = quotient <= __FLT_MAX__ ? quotient : 0.0f;
  int sum = 0, low_sum = 0;
  for (std::int64_t t = 0; t < quant_group; ++t) {
    // A non-finite input (NaN, or ±inf times a zero inverse) codes as 0; every finite one is within ±127.
    const float scaled = values[t] * inverse;
    const int code = (scaled < 0.0f ? -scaled : scaled) < 128.0f ? static_cast<int>(__builtin_rintf(scaled)) : 0;
    sum += code;
    low_sum += t < quant_group / 2 ? code : 0;
    codes[interleaved_position(g * quant_group + t)] = static_cast<std::int8_t>(code);
  }
  scales[g] = amax / 127.0f;
  sums[g] = scales[g] * static_cast<float>(sum);
  code_sums[g] = sum;
  half_starts[g] = -32 * low_sum;
  half_starts[groups + g] = -32 * (sum - low_sum);
}

#if defined(__AVX512F__) || defined(__AVX2__)

// In their own namespace, apart from qgemv_impl.hpp's vector helpers (whose
// vi is 256 bits wide in the plain AVX-512 unit). Each vector path provides:
// vi (W int32 lanes), magnitude, inverse_of_amax, to_codes,
// to_float, store_ints, store_bytes, pack_codes, transpose_codes,
// byte_sums4, int_add and times_minus_32 (the groups' amax: simd.hpp's
// combine_transpose).
namespace row_quantization {

#if defined(__AVX512F__)

using vi = __m512i;

inline vf magnitude(vf v) { return _mm512_abs_ps(v); }
/// 127 / amax in the lanes where amax > 0 and the quotient is finite, else 0.
inline vf inverse_of_amax(vf amax) {
  const vf quotient = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(amax, zero(), _CMP_GT_OQ), set1(127.0f), amax);
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(quotient, set1(__FLT_MAX__), _CMP_LE_OQ), quotient);
}
/// round(v · inverse), 0 where the product is not below 128 in magnitude (non-finite).
inline vi to_codes(vf v, vf inverse) {
  const vf scaled = mul(v, inverse);
  return _mm512_maskz_cvtps_epi32(_mm512_cmp_ps_mask(magnitude(scaled), set1(128.0f), _CMP_LT_OQ), scaled);
}
inline vf to_float(vi v) { return _mm512_cvtepi32_ps(v); }
inline void store_ints(std::int32_t* p, vi v) { _mm512_storeu_si512(p, v); }
inline void store_bytes(std::int8_t* p, vi v) { _mm512_storeu_si512(p, v); }

/// The int32 codes of groups a and b (16 each, a0 the first 16) as bytes: in
/// 128-bit lane i, the 4-byte chunks i and 4 + i of a and b, as (a i, b i,
/// a 4 + i, b 4 + i). The packs saturate, which codes in [-127, 127] never reach.
inline vi pack_codes(vi a0, vi a1, vi b0, vi b1) {
  return _mm512_packs_epi16(_mm512_packs_epi32(a0, b0), _mm512_packs_epi32(a1, b1));
}

/// 128-bit lanes (a 0, a 2, b 0, b 2) and (a 1, a 3, b 1, b 3).
inline vi even_lanes(vi a, vi b) { return _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)); }
inline vi odd_lanes(vi a, vi b) { return _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)); }

/// rows[k], pack_codes of groups 2k and 2k + 1, in place to the superblock's
/// code vectors: rows[v] holds chunk v (inputs 4v..4v+3) of group g in 32-bit lane g.
inline void transpose_codes(vi* rows) {
  vi quads[8];  // quads[2q + h]: groups 4q..4q+3 in each 128-bit lane i, chunk i + 4h
  for (int q = 0; q < 4; ++q) {
    quads[2 * q] = _mm512_unpacklo_epi64(rows[2 * q], rows[2 * q + 1]);
    quads[2 * q + 1] = _mm512_unpackhi_epi64(rows[2 * q], rows[2 * q + 1]);
  }
  for (int h = 0; h < 2; ++h) {
    const vi even_low = even_lanes(quads[h], quads[2 + h]), odd_low = odd_lanes(quads[h], quads[2 + h]);
    const vi even_high = even_lanes(quads[4 + h], quads[6 + h]), odd_high = odd_lanes(quads[4 + h], quads[6 + h]);
    rows[4 * h] = even_lanes(even_low, even_high);
    rows[4 * h + 1] = even_lanes(odd_low, odd_high);
    rows[4 * h + 2] = odd_lanes(even_low, even_high);
    rows[4 * h + 3] = odd_lanes(odd_low, odd_high);
  }
}

/// Lane g: the sum of the int8 codes in 32-bit lane g of the 4 vectors from `rows`.
inline vi byte_sums4(const vi* rows) {
  const vi ones = _mm512_set1_epi8(1);
  vi pair_sums = _mm512_maddubs_epi16(ones, rows[0]);  // 4 pair sums of at most 256 fit int16
  for (int v = 1; v < 4; ++v) pair_sums = _mm512_add_epi16(pair_sums, _mm512_maddubs_epi16(ones, rows[v]));
  return _mm512_madd_epi16(pair_sums, _mm512_set1_epi16(1));
}
inline vi int_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
/// −32 · v per 32-bit lane.
inline vi times_minus_32(vi v) { return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(v, 5)); }

#else  // AVX2

using vi = __m256i;

inline vf magnitude(vf v) { return _mm256_andnot_ps(set1(-0.0f), v); }
/// 127 / amax in the lanes where amax > 0 and the quotient is finite, else 0.
inline vf inverse_of_amax(vf amax) {
  const vf quotient = _mm256_and_ps(div(set1(127.0f), amax), _mm256_cmp_ps(amax, zero(), _CMP_GT_OQ));
  return _mm256_and_ps(quotient, _mm256_cmp_ps(quotient, set1(__FLT_MAX__), _CMP_LE_OQ));
}
/// round(v · inverse), 0 where the product is not below 128 in magnitude (non-finite).
inline vi to_codes(vf v, vf inverse) {
  const vf scaled = mul(v, inverse);
  const vf finite = _mm256_cmp_ps(magnitude(scaled), set1(128.0f), _CMP_LT_OQ);
  return _mm256_and_si256(_mm256_cvtps_epi32(scaled), _mm256_castps_si256(finite));
}
inline vf to_float(vi v) { return _mm256_cvtepi32_ps(v); }
inline void store_ints(std::int32_t* p, vi v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline void store_bytes(std::int8_t* p, vi v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

/// The int32 codes of 16 inputs of groups a and b (8 each, a0 the first 8)
/// as bytes: in 128-bit lane i, the chunks i and 2 + i of the 16, as (a i,
/// b i, a 2 + i, b 2 + i). The packs saturate, which codes in [-127, 127] never reach.
inline vi pack_codes(vi a0, vi a1, vi b0, vi b1) {
  return _mm256_packs_epi16(_mm256_packs_epi32(a0, b0), _mm256_packs_epi32(a1, b1));
}

/// rows[2p + h], pack_codes of groups 2p and 2p + 1 for inputs 16h..16h+15,
/// in place to the half superblock's code vectors: rows[v] holds chunk v
/// (inputs 4v..4v+3) of group g in 32-bit lane g.
inline void transpose_codes(vi* rows) {
  vi quads[8];  // quads[4c + s]: groups 4c..4c+3 in each 128-bit lane i, chunk 2s + i
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h) {
      quads[4 * c + 2 * h] = _mm256_unpacklo_epi64(rows[4 * c + h], rows[4 * c + 2 + h]);
      quads[4 * c + 2 * h + 1] = _mm256_unpackhi_epi64(rows[4 * c + h], rows[4 * c + 2 + h]);
    }
  for (int s = 0; s < 4; ++s) {
    rows[2 * s] = _mm256_permute2x128_si256(quads[s], quads[4 + s], 0x20);
    rows[2 * s + 1] = _mm256_permute2x128_si256(quads[s], quads[4 + s], 0x31);
  }
}

/// Lane g: the sum of the int8 codes in 32-bit lane g of the 4 vectors from `rows`.
inline vi byte_sums4(const vi* rows) {
  const vi ones = _mm256_set1_epi8(1);
  vi pair_sums = _mm256_maddubs_epi16(ones, rows[0]);  // 4 pair sums of at most 256 fit int16
  for (int v = 1; v < 4; ++v) pair_sums = _mm256_add_epi16(pair_sums, _mm256_maddubs_epi16(ones, rows[v]));
  return _mm256_madd_epi16(pair_sums, _mm256_set1_epi16(1));
}
inline vi int_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
/// −32 · v per 32-bit lane.
inline vi times_minus_32(vi v) { return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(v, 5)); }

#endif

/// W floats of the row from input k on, zeros at or past `cols` (never read).
inline vf load_inputs(const float* x, std::int64_t k, std::int64_t cols) {
  if (k + W <= cols) return load(x + k);
  return k < cols ? load_tail(x + k, static_cast<int>(cols - k)) : zero();
}

/// Quantises the W groups from group `first` (a multiple of W), one vector
/// lane a group, as quantize_group does each.
inline void quantize_groups(const float* x, std::int64_t cols, std::int64_t first, std::int64_t groups,
                            std::int8_t* codes, float* scales, float* sums, std::int32_t* code_sums,
                            std::int32_t* half_starts) {
  constexpr int parts = quant_group / W;  // vectors a group
  const std::int64_t start = first * quant_group;
  vf maxima[W];
  for (int g = 0; g < W; ++g) {
    maxima[g] = zero();
    for (int j = 0; j < parts; ++j)  // max(|x|, m) keeps m where x is NaN, as quantize_group does
      maxima[g] = max(magnitude(load_inputs(x, start + g * quant_group + j * W, cols)), maxima[g]);
  }
  const vf amax = combine_transpose(maxima, [](vf a, vf b) { return max(a, b); });  // lane g: group g's amax
  const vf inverse = inverse_of_amax(amax);
  float inverses[W];
  store(inverses, inverse);
  vi rows[8];
  for (int g = 0; g < W; g += 2) {
    vi a[parts], b[parts];
    for (int j = 0; j < parts; ++j) {
      a[j] = to_codes(load_inputs(x, start + g * quant_group + j * W, cols), set1(inverses[g]));
      b[j] = to_codes(load_inputs(x, start + (g + 1) * quant_group + j * W, cols), set1(inverses[g + 1]));
    }
    for (int j = 0; j < parts; j += 2) rows[g / 2 * (parts / 2) + j / 2] = pack_codes(a[j], a[j + 1], b[j], b[j + 1]);
  }
  transpose_codes(rows);
  // The groups' 4-byte lanes in their superblock's 8 vectors of 64 bytes.
  std::int8_t* lanes = codes + first / (quant_superblock / quant_group) * quant_superblock +
                       4 * (first % (quant_superblock / quant_group));
  for (int v = 0; v < 8; ++v) store_bytes(lanes + 64 * v, rows[v]);
  const vf scale = div(amax, set1(127.0f));
  // Vectors 0-3 hold each group's first 16 inputs.
  const vi low_sum = byte_sums4(rows), high_sum = byte_sums4(rows + 4), sum = int_add(low_sum, high_sum);
  store(scales + first, scale);
  store(sums + first, mul(scale, to_float(sum)));
  store_ints(code_sums + first, sum);
  store_ints(half_starts + first, times_minus_32(low_sum));
  store_ints(half_starts + groups + first, times_minus_32(high_sum));
}

}  // namespace row_quantization

#endif

/// Quantises one activation row of `cols` inputs, zero-padded to
/// `padded_cols` (a multiple of quant_superblock): codes in interleaved
/// order, and per group its scale, scale · Σ codes, Σ codes and −32 · Σ
/// codes of each half (half_starts: the first halves', then the second's).
inline void quantize_row(const float* x, std::int64_t cols, std::int64_t padded_cols, std::int8_t* codes, float* scales,
                         float* sums, std::int32_t* code_sums, std::int32_t* half_starts) {
  const std::int64_t groups = padded_cols / quant_group;
#if defined(__AVX512F__) || defined(__AVX2__)
  for (std::int64_t g = 0; g < groups; g += W)
    row_quantization::quantize_groups(x, cols, g, groups, codes, scales, sums, code_sums, half_starts);
#else
  for (std::int64_t g = 0; g < groups; ++g)
    quantize_group(x, cols, g, groups, codes, scales, sums, code_sums, half_starts);
#endif
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
