#pragma once
// Skinny GEMM for decode (few activation rows): each tile of NR weight rows
// is streamed from memory once and reused, from L1/L2, for every MR-row slice
// of the activations. Included only by the ISA units.

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

template <elem T>
struct weight_row;

template <>
struct weight_row<elem::f32> {
  using type = float;
  static vf load_at(const float* p) { return load(p); }
  static vf load_at_tail(const float* p, int n) { return load_tail(p, n); }
};

template <>
struct weight_row<elem::bf16> {
  using type = std::uint16_t;
  static vf load_at(const std::uint16_t* p) { return load_bf16(p); }
  static vf load_at_tail(const std::uint16_t* p, int n) { return load_bf16_tail(p, n); }
};

template <>
struct weight_row<elem::f16> {
  using type = std::uint16_t;
  static vf load_at(const std::uint16_t* p) { return load_f16(p); }
  static vf load_at_tail(const std::uint16_t* p, int n) { return load_f16_tail(p, n); }
};

/// Prefetches slice `step` of the `NR` weight rows that follow the tile at
/// `rows` (contiguous, `row_bytes` each): a tile's rows are one contiguous
/// run, read as NR short streams that the hardware prefetcher restarts at
/// every 4 KiB page, so each step pulls in its share of the next tile.
template <int NR>
inline void prefetch_next_tile(const void* rows, std::int64_t row_bytes, std::int64_t step, std::int64_t step_bytes,
                               const void* limit) {
  const char* next = static_cast<const char*>(rows) + NR * row_bytes + step * step_bytes;
  for (std::int64_t b = 0; b < step_bytes && next + b < limit; b += 64) prefetch(next + b);
}

/// One tile: weight rows [n0, n0 + NR) × activation rows [m0, m0 + MR), f32 math.
template <elem T, int NR, int MR>
void gemv_tile(const gemv_args& a, std::int64_t n0, std::int64_t m0) {
  using loader = weight_row<T>;
  using elem_t = typename loader::type;
  const std::int64_t k_total = a.k;
  const auto* weights = static_cast<const elem_t*>(a.weights);
  const elem_t* w[NR];
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) w[j] = weights + (n0 + j) * k_total;
  const float* x[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) x[i] = a.x + (m0 + i) * a.x_stride;
  const void* limit = weights + a.n_end * k_total;
  const std::int64_t row_bytes = k_total * static_cast<std::int64_t>(sizeof(elem_t));
  const bool stream = m0 == 0;  // later row slices find the tile in cache
  vf acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = zero();
  std::int64_t k = 0;
  for (; k + W <= k_total; k += W) {
    if (stream)
      prefetch_next_tile<NR>(w[0], row_bytes, k / W, NR * W * static_cast<std::int64_t>(sizeof(elem_t)), limit);
    vf wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = loader::load_at(w[j] + k);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const vf xv = load(x[i] + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = fma(xv, wv[j], acc[i][j]);
    }
  }
  if (k < k_total) {
    const int rest = static_cast<int>(k_total - k);
    vf wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = loader::load_at_tail(w[j] + k, rest);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const vf xv = load_tail(x[i] + k, rest);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = fma(xv, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* out = a.out + (m0 + i) * a.out_stride;
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) out[n0 + j] = reduce_add(acc[i][j]) + (a.bias ? a.bias[n0 + j] : 0.0f);
  }
}

#if defined(__AVX512BF16__)
/// bf16 weights × bf16-rounded activations with vdpbf16ps (32 products per
/// instruction). Every loop over the accumulators is unrolled so they stay
/// in registers.
template <int NR, int MR>
void gemv_tile_dot_bf16(const gemv_args& a, std::int64_t n0, std::int64_t m0) {
  const std::int64_t k_total = a.k;
  const auto* weights = static_cast<const std::uint16_t*>(a.weights);
  const std::uint16_t* w[NR];
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) w[j] = weights + (n0 + j) * k_total;
  const std::uint16_t* x[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) x[i] = a.x_bf16 + (m0 + i) * k_total;
  const void* limit = weights + a.n_end * k_total;
  const bool stream = m0 == 0;
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < k_total; k += 32) {
    const __mmask32 mask =
        k + 32 <= k_total ? ~__mmask32{0} : static_cast<__mmask32>((std::uint64_t{1} << (k_total - k)) - 1);
    if (stream) prefetch_next_tile<NR>(w[0], k_total * 2, k / 32, NR * 64, limit);
    __m512i wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_epi16(mask, w[j] + k);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512i xv = _mm512_maskz_loadu_epi16(mask, x[i] + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)xv, (__m512bh)wv[j]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* out = a.out + (m0 + i) * a.out_stride;
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) out[n0 + j] = _mm512_reduce_add_ps(acc[i][j]) + (a.bias ? a.bias[n0 + j] : 0.0f);
  }
}
#endif

// Register budget: NR * MR accumulators + NR weight vectors + 1 activation
// vector must fit the 32 zmm (AVX-512) or 16 ymm (AVX2) registers. One pass
// over a weight tile serves up to `max_rows` activation rows.
#if defined(__AVX512F__)
constexpr int max_rows = 8;
#elif defined(__AVX2__)
constexpr int max_rows = 2;
#else
constexpr int max_rows = 4;
#endif

template <elem T, int NR, int MR>
void run_tile(const gemv_args& a, std::int64_t n0, std::int64_t m0) {
#if defined(__AVX512BF16__)
  if constexpr (T == elem::bf16) {
    if (a.x_bf16 != nullptr) {
      gemv_tile_dot_bf16<NR, MR>(a, n0, m0);
      return;
    }
  }
#endif
  gemv_tile<T, NR, MR>(a, n0, m0);
}

/// Rows [m0, m0 + rows) against weight rows [n0, n0 + NR), rows <= MAX.
template <elem T, int NR, int MAX>
void run_rows(const gemv_args& a, std::int64_t n0, std::int64_t m0, std::int64_t rows) {
  if constexpr (MAX > 1) {
    if (rows < MAX) {
      run_rows<T, NR, MAX - 1>(a, n0, m0, rows);
      return;
    }
  }
  run_tile<T, NR, MAX>(a, n0, m0);
}

/// Weight rows [n, n + NR) for every activation row, MAX rows per pass.
template <elem T, int NR, int MAX>
void run_columns(const gemv_args& a, std::int64_t n) {
  for (std::int64_t m0 = 0; m0 < a.m_rows; m0 += MAX)
    run_rows<T, NR, MAX>(a, n, m0, a.m_rows - m0 < MAX ? a.m_rows - m0 : MAX);
}

/// Weight rows [n, n_end) in tiles of NR, then single rows.
template <elem T, int NR, int MAX>
void run_range(const gemv_args& a) {
  std::int64_t n = a.n_begin;
  for (; n + NR <= a.n_end; n += NR) run_columns<T, NR, MAX>(a, n);
  for (; n < a.n_end; ++n) run_columns<T, 1, MAX>(a, n);
}

template <elem T>
void gemv_typed(const gemv_args& a) {
#if defined(__AVX512F__)
  if (a.m_rows == 1) {
    run_range<T, 8, 1>(a);  // 8 streams in flight for a single activation row
  } else if (a.m_rows <= 4) {
    run_range<T, 4, 4>(a);
  } else {
    run_range<T, 3, 8>(a);  // 24 accumulators: up to 8 rows in one pass
  }
#else
  run_range<T, 4, max_rows>(a);
#endif
}

inline void gemv(const gemv_args& a) {
  switch (a.weight_type) {
    case elem::f32:
      gemv_typed<elem::f32>(a);
      return;
    case elem::bf16:
      gemv_typed<elem::bf16>(a);
      return;
    case elem::f16:
      gemv_typed<elem::f16>(a);
      return;
  }
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
