#pragma once
// A thin float-vector layer over AVX-512, AVX2 or plain scalars, chosen by
// the compile flags of the including translation unit. Only the ISA units
// include it (see isa_kernels.hpp for their include rule); everything lives
// in the namespace TROUPE_ISA_NS they define, so each unit has its own copy.

// GCC 12's AVX-512 headers self-initialise "undefined" vectors, which
// -Wuninitialized reports at every use; the warning is about the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

#ifndef TROUPE_ISA_NS
#error "define TROUPE_ISA_NS before including simd.hpp"
#endif

#if !defined(__AVX2__) && !defined(__AVX512F__)
namespace troupe {
// Out-of-line in kernels/dtype.cpp (baseline code), used by the scalar unit.
float f16_to_float(std::uint16_t bits);
std::uint16_t float_to_f16(float value);
}  // namespace troupe
#endif

namespace troupe::cpu::TROUPE_ISA_NS {

inline float bits_to_float(std::uint32_t bits) {
  float value;
  __builtin_memcpy(&value, &bits, sizeof value);
  return value;
}

inline std::uint32_t float_to_bits(float value) {
  std::uint32_t bits;
  __builtin_memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float scalar_bf16_to_f32(std::uint16_t bits) { return bits_to_float(static_cast<std::uint32_t>(bits) << 16); }

inline std::uint16_t scalar_f32_to_bf16(float value) {
  std::uint32_t bits = float_to_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

#if defined(__AVX512F__)

constexpr int W = 16;
using vf = __m512;

inline __mmask16 tail_mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
inline vf zero() { return _mm512_setzero_ps(); }
inline vf set1(float x) { return _mm512_set1_ps(x); }
inline vf load(const float* p) { return _mm512_loadu_ps(p); }
inline vf load_tail(const float* p, int n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
inline void store(float* p, vf v) { _mm512_storeu_ps(p, v); }
inline void store_tail(float* p, vf v, int n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
inline vf widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
inline vf load_bf16(const std::uint16_t* p) {
  return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline vf load_bf16_tail(const std::uint16_t* p, int n) {
  return widen_bf16(_mm256_maskz_loadu_epi16(tail_mask(n), p));
}
inline vf load_f16(const std::uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline vf load_f16_tail(const std::uint16_t* p, int n) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), p));
}
inline __m256i narrow_bf16(vf v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  rounded = _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(rounded);
}
inline void store_bf16(std::uint16_t* p, vf v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow_bf16(v)); }
inline void store_bf16_tail(std::uint16_t* p, vf v, int n) {
  _mm256_mask_storeu_epi16(p, tail_mask(n), narrow_bf16(v));
}
inline __m256i narrow_f16(vf v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline void store_f16(std::uint16_t* p, vf v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow_f16(v)); }
inline void store_f16_tail(std::uint16_t* p, vf v, int n) { _mm256_mask_storeu_epi16(p, tail_mask(n), narrow_f16(v)); }
inline vf add(vf a, vf b) { return _mm512_add_ps(a, b); }
inline vf sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
inline vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
inline vf div(vf a, vf b) { return _mm512_div_ps(a, b); }
inline vf max(vf a, vf b) { return _mm512_max_ps(a, b); }
inline vf min(vf a, vf b) { return _mm512_min_ps(a, b); }
/// a * b + c
inline vf fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
inline float reduce_add(vf v) { return _mm512_reduce_add_ps(v); }
inline float reduce_max(vf v) { return _mm512_reduce_max_ps(v); }
inline vf round_nearest(vf v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline vf pow2_of_int(vf n) {
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_castsi512_ps(e);
}
inline vf zero_below(vf v, vf x, float limit) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, set1(limit), _CMP_GE_OQ), v);
}
/// Lane j of the result is all lanes of v[j] combined by `combine` (add:
/// 16 horizontal sums at once; max: 16 maxima), pairing lanes as a halving
/// transpose does (`combine(a, b)` always with a from the lower half).
template <class Combine>
inline vf combine_transpose(const vf* v, Combine combine) {
  vf pairs[8], quads[4];
  for (int i = 0; i < 8; ++i)
    pairs[i] = combine(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)
    quads[i] = combine(_mm512_shuffle_ps(pairs[2 * i], pairs[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(pairs[2 * i], pairs[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // quads[i] holds lanes 4i..4i+3 in every 128-bit chunk; combine the four chunks.
  const vf lo = combine(_mm512_shuffle_f32x4(quads[0], quads[1], _MM_SHUFFLE(2, 0, 2, 0)),
                        _mm512_shuffle_f32x4(quads[0], quads[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const vf hi = combine(_mm512_shuffle_f32x4(quads[2], quads[3], _MM_SHUFFLE(2, 0, 2, 0)),
                        _mm512_shuffle_f32x4(quads[2], quads[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return combine(_mm512_shuffle_f32x4(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
                 _mm512_shuffle_f32x4(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
}
/// Lane j of the result is the sum of all lanes of v[j] (16 horizontal sums at once).
inline vf reduce_transpose(const vf* v) { return combine_transpose(v, add); }

#elif defined(__AVX2__)

constexpr int W = 8;
using vf = __m256;

inline __m256i tail_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline vf zero() { return _mm256_setzero_ps(); }
inline vf set1(float x) { return _mm256_set1_ps(x); }
inline vf load(const float* p) { return _mm256_loadu_ps(p); }
inline vf load_tail(const float* p, int n) { return _mm256_maskload_ps(p, tail_mask(n)); }
inline void store(float* p, vf v) { _mm256_storeu_ps(p, v); }
inline void store_tail(float* p, vf v, int n) { _mm256_maskstore_ps(p, tail_mask(n), v); }
inline __m128i load_half_tail(const std::uint16_t* p, int n) {
  std::uint16_t buffer[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; ++i) buffer[i] = p[i];
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(buffer));
}
inline vf widen_bf16(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
inline vf load_bf16(const std::uint16_t* p) { return widen_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline vf load_bf16_tail(const std::uint16_t* p, int n) { return widen_bf16(load_half_tail(p, n)); }
inline vf load_f16(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline vf load_f16_tail(const std::uint16_t* p, int n) { return _mm256_cvtph_ps(load_half_tail(p, n)); }
inline __m128i narrow_bf16(vf v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  rounded = _mm256_blendv_epi8(rounded, quiet, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  // Pack the low 16 bits of each lane (values < 2^16, so unsigned saturation is exact).
  const __m128i lo = _mm256_castsi256_si128(rounded), hi = _mm256_extracti128_si256(rounded, 1);
  return _mm_packus_epi32(lo, hi);
}
inline void store_half_tail(std::uint16_t* p, __m128i h, int n) {
  std::uint16_t buffer[8];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(buffer), h);
  for (int i = 0; i < n; ++i) p[i] = buffer[i];
}
inline void store_bf16(std::uint16_t* p, vf v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow_bf16(v)); }
inline void store_bf16_tail(std::uint16_t* p, vf v, int n) { store_half_tail(p, narrow_bf16(v), n); }
inline __m128i narrow_f16(vf v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline void store_f16(std::uint16_t* p, vf v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow_f16(v)); }
inline void store_f16_tail(std::uint16_t* p, vf v, int n) { store_half_tail(p, narrow_f16(v), n); }
inline vf add(vf a, vf b) { return _mm256_add_ps(a, b); }
inline vf sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
inline vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
inline vf div(vf a, vf b) { return _mm256_div_ps(a, b); }
inline vf max(vf a, vf b) { return _mm256_max_ps(a, b); }
inline vf min(vf a, vf b) { return _mm256_min_ps(a, b); }
inline vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
inline float reduce_add(vf v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float reduce_max(vf v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline vf round_nearest(vf v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline vf pow2_of_int(vf n) {
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_castsi256_ps(e);
}
inline vf zero_below(vf v, vf x, float limit) { return _mm256_and_ps(v, _mm256_cmp_ps(x, set1(limit), _CMP_GE_OQ)); }
/// Lane j of the result is all lanes of v[j] combined by `combine` (8 at once; as the AVX-512 one).
template <class Combine>
inline vf combine_transpose(const vf* v, Combine combine) {
  vf pairs[4], quads[2];
  for (int i = 0; i < 4; ++i)
    pairs[i] = combine(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 2; ++i)
    quads[i] = combine(_mm256_shuffle_ps(pairs[2 * i], pairs[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm256_shuffle_ps(pairs[2 * i], pairs[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return combine(_mm256_permute2f128_ps(quads[0], quads[1], 0x20), _mm256_permute2f128_ps(quads[0], quads[1], 0x31));
}
/// Lane j of the result is the sum of all lanes of v[j] (8 horizontal sums at once).
inline vf reduce_transpose(const vf* v) { return combine_transpose(v, add); }

#else  // scalar

constexpr int W = 1;
using vf = float;

inline vf zero() { return 0.0f; }
inline vf set1(float x) { return x; }
inline vf load(const float* p) { return *p; }
inline vf load_tail(const float*, int) { return 0.0f; }
inline void store(float* p, vf v) { *p = v; }
inline void store_tail(float*, vf, int) {}
inline vf load_bf16(const std::uint16_t* p) { return scalar_bf16_to_f32(*p); }
inline vf load_bf16_tail(const std::uint16_t*, int) { return 0.0f; }
inline void store_bf16(std::uint16_t* p, vf v) { *p = scalar_f32_to_bf16(v); }
inline void store_bf16_tail(std::uint16_t*, vf, int) {}
inline vf load_f16(const std::uint16_t* p) { return troupe::f16_to_float(*p); }
inline vf load_f16_tail(const std::uint16_t*, int) { return 0.0f; }
inline void store_f16(std::uint16_t* p, vf v) { *p = troupe::float_to_f16(v); }
inline void store_f16_tail(std::uint16_t*, vf, int) {}
inline vf add(vf a, vf b) { return a + b; }
inline vf sub(vf a, vf b) { return a - b; }
inline vf mul(vf a, vf b) { return a * b; }
inline vf div(vf a, vf b) { return a / b; }
inline vf max(vf a, vf b) { return a < b ? b : a; }
inline vf min(vf a, vf b) { return b < a ? b : a; }
inline vf fma(vf a, vf b, vf c) { return a * b + c; }
inline float reduce_add(vf v) { return v; }
inline float reduce_max(vf v) { return v; }
inline vf reduce_transpose(const vf* v) { return v[0]; }

#endif

/// Hints that `p` will be read soon (into all cache levels).
inline void prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }

#if defined(__AVX2__) || defined(__AVX512F__)
/// e^x to about 2 ulp for x in [-87.3, 88]; 0 below, e^88 above (so -inf gives 0).
inline vf exp(vf x) {
  const vf clamped = min(x, set1(88.0f));
  const vf n = round_nearest(mul(clamped, set1(1.44269504088896341f)));
  vf r = fma(n, set1(-0.693359375f), clamped);  // Cody-Waite split of ln 2
  r = fma(n, set1(2.12194440e-4f), r);
  vf p = set1(1.0f / 5040.0f);
  p = fma(p, r, set1(1.0f / 720.0f));
  p = fma(p, r, set1(1.0f / 120.0f));
  p = fma(p, r, set1(1.0f / 24.0f));
  p = fma(p, r, set1(1.0f / 6.0f));
  p = fma(p, r, set1(0.5f));
  p = fma(p, r, set1(1.0f));
  p = fma(p, r, set1(1.0f));
  return zero_below(mul(p, pow2_of_int(max(n, set1(-126.0f)))), x, -87.33654f);
}
#else
inline vf exp(vf x) { return __builtin_expf(x); }
#endif

}  // namespace troupe::cpu::TROUPE_ISA_NS
