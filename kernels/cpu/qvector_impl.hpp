#pragma once
// The vector operations the quantised GEMV and GEMM tiles (qgemv_impl.hpp,
// qgemm_impl.hpp) are written in, per ISA: 16 groups a vector with
// AVX-512 VNNI (vpdpbusd), 8 with AVX2 (maddubs); f16 and block-factored
// group scales widened to f32. Included only by the ISA units.

#include <cstring>

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

inline float half_to_float(std::uint16_t bits) {
#if defined(__F16C__)
  return _cvtsh_ss(bits);
#else
  return troupe::f16_to_float(bits);
#endif
}

#if defined(__AVX512VNNI__)

// 16 groups per vector: u8 weight codes × s8 activation codes with vpdpbusd.
constexpr bool int8_dot_unsigned = true;
using vi = __m512i;
constexpr int vector_bytes = 64;
constexpr int halves = 1;
inline vi load_codes(const void* p) { return _mm512_loadu_si512(p); }
inline vi low_nibbles(vi v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0f)); }
inline vi high_nibbles(vi v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0f)); }
inline vi int_zero() { return _mm512_setzero_si512(); }
inline vi int_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
inline vi int_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
/// v / 4 per 32-bit lane, for multiples of 4 (an arithmetic shift: exact for either sign).
inline vi quartered(vi v) { return _mm512_srai_epi32(v, 2); }
inline vi bytes_or(vi a, vi b) { return _mm512_or_si512(a, b); }
/// Bits 2 Pair and 2 Pair + 1 of each byte of `plane` moved to bits 4 and 5
/// (int6's fifth and sixth code bits; the 16-bit shifts carry bits across
/// bytes only outside the mask).
template <int Pair>
inline vi high_code_bits(vi plane) {
  const vi mask = _mm512_set1_epi8(0x30);
  if constexpr (Pair == 0) return _mm512_and_si512(_mm512_slli_epi16(plane, 4), mask);
  if constexpr (Pair == 1) return _mm512_and_si512(_mm512_slli_epi16(plane, 2), mask);
  if constexpr (Pair == 2) return _mm512_and_si512(plane, mask);
  return _mm512_and_si512(_mm512_srli_epi16(plane, 2), mask);
}
/// −(v << shift) per 32-bit lane.
template <int Shift>
inline vi negated_shifted(vi v) {
  return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(v, Shift));
}
/// acc + Σ over each lane's 4 bytes of w (u8, < 16 for int4) × x (s8).
inline vi dot_nibbles(vi acc, vi w, vi x) { return _mm512_dpbusd_epi32(acc, w, x); }
inline vi dot_int8(vi acc, vi w, vi x) { return _mm512_dpbusd_epi32(acc, w, x); }
/// `codes` + 16 at each byte whose bit is set in the 64 bits at `bits`
/// (int5_asym's fifth code bit of the vector's 64 positions).
inline vi with_fifth_bits(vi codes, const std::uint8_t* bits) {
  const auto mask = static_cast<__mmask64>(_mm_cvtsi128_si64(_mm_loadu_si64(bits)));
  return _mm512_mask_add_epi8(codes, mask, codes, _mm512_set1_epi8(16));
}
/// Each byte (a code 0..15) replaced by int4_nl_biased_levels[code].
inline vi biased_levels(vi codes) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(int4_nl_biased_levels));
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(table), codes);
}
inline void store_codes(void* p, vi v) { _mm512_storeu_si512(p, v); }
using qf = __m512;
constexpr int lanes = 16;
inline qf to_float(vi v) { return _mm512_cvtepi32_ps(v); }
inline qf load_halfs(const std::uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
/// Block-factored group factors (quantized_matrix::block_scales) of 16
/// groups from a multiple of 16: lanes 0-7 take factors[0], lanes 8-15
/// factors[1] (f16), each times its code of `codes` (s8 where `Signed`,
/// else u8); exact in f32.
template <bool Signed>
inline qf block_factored(const std::uint16_t* factors, const std::uint8_t* codes) {
  std::int32_t pair;
  std::memcpy(&pair, factors, 4);
  const __m512 both = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128(pair)));
  const qf spread = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), both);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
  return _mm512_mul_ps(spread, _mm512_cvtepi32_ps(Signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes)));
}
inline qf qzero() { return _mm512_setzero_ps(); }
inline qf qset1(float v) { return _mm512_set1_ps(v); }
inline qf qload(const float* p) { return _mm512_loadu_ps(p); }
inline void qstore(float* p, qf v) { _mm512_storeu_ps(p, v); }
inline qf qadd(qf a, qf b) { return _mm512_add_ps(a, b); }
inline qf qmul(qf a, qf b) { return _mm512_mul_ps(a, b); }
inline qf qfma(qf a, qf b, qf c) { return _mm512_fmadd_ps(a, b, c); }
/// Σ of the lanes as a halving tree: lanes (l, l + 8), then (l, l + 4),
/// (l, l + 2), (0, 1). Spelled out, because qsum4 must pair the same lanes.
inline float qsum(qf v) {
  const __m256 s1 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 s2 = _mm_add_ps(_mm256_castps256_ps128(s1), _mm256_extractf128_ps(s1, 1));
  const __m128 s3 = _mm_add_ps(s2, _mm_movehl_ps(s2, s2));
  return _mm_cvtss_f32(_mm_add_ss(s3, _mm_movehdup_ps(s3)));
}
/// qsum of v[0..4) at once into out[0..4): the same pairs, so the same bits,
/// in a quarter of the shuffles.
inline void qsum4(const qf* v, float* out) {
  const qf s1_ab = _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const qf s1_cd = _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_f32x4(v[2], v[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // One 128-bit block per vector from here on.
  const qf s2 = _mm512_add_ps(_mm512_shuffle_f32x4(s1_ab, s1_cd, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(s1_ab, s1_cd, _MM_SHUFFLE(3, 1, 3, 1)));
  const qf s3 = _mm512_add_ps(s2, _mm512_permute_ps(s2, _MM_SHUFFLE(1, 0, 3, 2)));
  const qf s4 = _mm512_add_ps(s3, _mm512_permute_ps(s3, _MM_SHUFFLE(2, 3, 0, 1)));
  _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_permutexvar_ps(
                         _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), s4)));
}

#elif defined(__AVX2__)

// 8 groups per vector (each 64-byte vector of the layout read as two
// halves): maddubs on u8 × s8, with int8 weights made signed first so the
// 16-bit pair sums cannot saturate.
constexpr bool int8_dot_unsigned = false;
using vi = __m256i;
constexpr int vector_bytes = 32;
constexpr int halves = 2;
inline vi load_codes(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline vi low_nibbles(vi v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
inline vi high_nibbles(vi v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f)); }
inline vi int_zero() { return _mm256_setzero_si256(); }
inline vi int_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
inline vi int_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
inline vi quartered(vi v) { return _mm256_srai_epi32(v, 2); }
inline vi bytes_or(vi a, vi b) { return _mm256_or_si256(a, b); }
template <int Pair>
inline vi high_code_bits(vi plane) {
  const vi mask = _mm256_set1_epi8(0x30);
  if constexpr (Pair == 0) return _mm256_and_si256(_mm256_slli_epi16(plane, 4), mask);
  if constexpr (Pair == 1) return _mm256_and_si256(_mm256_slli_epi16(plane, 2), mask);
  if constexpr (Pair == 2) return _mm256_and_si256(plane, mask);
  return _mm256_and_si256(_mm256_srli_epi16(plane, 2), mask);
}
template <int Shift>
inline vi negated_shifted(vi v) {
  return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(v, Shift));
}
inline vi dot_nibbles(vi acc, vi w, vi x) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
}
inline vi dot_int8(vi acc, vi w, vi x) {
  const vi q = _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
  const vi products = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(products, _mm256_set1_epi16(1)));
}
/// `codes` + 16 at each byte whose bit is set in the 32 bits at `bits`: byte
/// j takes bit j % 8 of bits byte j / 8 (spread by a shuffle, tested by a mask).
inline vi with_fifth_bits(vi codes, const std::uint8_t* bits) {
  const int word = _mm_cvtsi128_si32(_mm_loadu_si32(bits));
  const vi spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(word),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const vi bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const vi set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_add_epi8(codes, _mm256_and_si256(set, _mm256_set1_epi8(16)));
}
inline vi biased_levels(vi codes) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(int4_nl_biased_levels));
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), codes);
}
inline void store_codes(void* p, vi v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
using qf = __m256;
constexpr int lanes = 8;
inline qf to_float(vi v) { return _mm256_cvtepi32_ps(v); }
inline qf load_halfs(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
/// Block-factored group factors of 8 groups from a multiple of 8 (one
/// block): factors[0] (f16) times each code of `codes` (s8 where `Signed`,
/// else u8); exact in f32.
template <bool Signed>
inline qf block_factored(const std::uint16_t* factors, const std::uint8_t* codes) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes));
  return _mm256_mul_ps(_mm256_set1_ps(half_to_float(*factors)),
                       _mm256_cvtepi32_ps(Signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes)));
}
inline qf qzero() { return _mm256_setzero_ps(); }
inline qf qset1(float v) { return _mm256_set1_ps(v); }
inline qf qload(const float* p) { return _mm256_loadu_ps(p); }
inline void qstore(float* p, qf v) { _mm256_storeu_ps(p, v); }
inline qf qadd(qf a, qf b) { return _mm256_add_ps(a, b); }
inline qf qmul(qf a, qf b) { return _mm256_mul_ps(a, b); }
inline qf qfma(qf a, qf b, qf c) { return _mm256_fmadd_ps(a, b, c); }
inline float qsum(qf v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline void qsum4(const qf* v, float* out) {
  for (int i = 0; i < 4; ++i) out[i] = qsum(v[i]);
}

#endif

}  // namespace troupe::cpu::TROUPE_ISA_NS
