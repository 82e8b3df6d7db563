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

/// One k step of W elements (`rest` < W: the last, partial one) for a tile
/// of NR weight rows × MR activation rows: acc[i][j] += x[i] * w[j] lane by
/// lane. `Pinned` keeps each activation vector in a register: otherwise GCC
/// folds its load into each of the NR fmas that use it (NR + MR * NR loads
/// per step instead of NR + MR), which bounds the loop once the operands sit
/// in cache, as in K-blocked passes; streaming weights from memory, the
/// folded form measured faster.
template <elem T, int NR, int MR, bool Pinned>
[[gnu::always_inline]] inline void fma_step(vf (&acc)[MR][NR], const typename weight_row<T>::type* const (&w)[NR],
                                            const float* const (&x)[MR], std::int64_t k, int rest) {
  using loader = weight_row<T>;
  vf wv[NR];
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) wv[j] = rest < W ? loader::load_at_tail(w[j] + k, rest) : loader::load_at(w[j] + k);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    vf xv = rest < W ? load_tail(x[i] + k, rest) : load(x[i] + k);
    if constexpr (Pinned) {
#if defined(__AVX512F__)
      asm("" : "+v"(xv));
#else
      asm("" : "+x"(xv));
#endif
    }
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = fma(xv, wv[j], acc[i][j]);
  }
}

/// out[m0 + i][n0 + j] = Σ lanes of acc[i][j] + bias[n0 + j].
template <int NR, int MR, class V, class Reduce>
inline void write_tile(const gemv_args& a, std::int64_t n0, std::int64_t m0, const V (&acc)[MR][NR], Reduce reduce) {
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* out = a.out + (m0 + i) * a.out_stride;
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) out[n0 + j] = reduce(acc[i][j]) + (a.bias ? a.bias[n0 + j] : 0.0f);
  }
}

/// Pointers to the NR weight rows and MR activation rows of one tile.
template <elem T, int NR, int MR>
struct tile_rows {
  const typename weight_row<T>::type* w[NR];
  const float* x[MR];
  tile_rows(const gemv_args& a, std::int64_t n0, std::int64_t m0) {
    const auto* weights = static_cast<const typename weight_row<T>::type*>(a.weights);
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) w[j] = weights + (n0 + j) * a.k;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) x[i] = a.x + (m0 + i) * a.x_stride;
  }
};

/// One tile over all of K: weight rows [n0, n0 + NR) × activation rows
/// [m0, m0 + MR), f32 math.
template <elem T, int NR, int MR>
void gemv_tile(const gemv_args& a, std::int64_t n0, std::int64_t m0) {
  const tile_rows<T, NR, MR> rows(a, n0, m0);
  const std::int64_t k_total = a.k;
  const std::int64_t element_bytes = static_cast<std::int64_t>(sizeof(typename weight_row<T>::type));
  const void* limit = static_cast<const char*>(a.weights) + a.n_end * k_total * element_bytes;
  const bool stream = m0 == 0;  // later row slices find the tile in cache
  vf acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = zero();
  std::int64_t k = 0;
  for (; k + W <= k_total; k += W) {
    if (stream) prefetch_next_tile<NR>(rows.w[0], k_total * element_bytes, k / W, NR * W * element_bytes, limit);
    fma_step<T, NR, MR, false>(acc, rows.w, rows.x, k, W);
  }
  if (k < k_total) fma_step<T, NR, MR, false>(acc, rows.w, rows.x, k, static_cast<int>(k_total - k));
  write_tile<NR, MR>(a, n0, m0, acc, [](vf v) { return reduce_add(v); });
}

/// The part of K one K-blocked pass covers (gemv_args::k_block > 0): it
/// resumes the partial sums of activation row m0 + i and weight row n from
/// `state` + (i * stride + n - n_begin) * W, and parks them there again
/// unless it reaches the end of K. Block boundaries are multiples of 32, so
/// every element sees the same fma steps, in the same order, as in one
/// gemv_tile pass over all of K.
struct k_pass {
  std::int64_t begin = 0, end = 0;
  float* state = nullptr;
  std::int64_t stride = 0;
};

/// Where a K-blocked pass parks the partial sums of (row m0 + i, weight row n).
inline float* state_at(const k_pass& pass, const gemv_args& a, int i, std::int64_t n) {
  return pass.state + (i * pass.stride + n - a.n_begin) * W;
}

/// One tile over the K range of `pass` (see k_pass), operands from cache.
template <elem T, int NR, int MR>
void gemv_tile_blocked(const gemv_args& a, std::int64_t n0, std::int64_t m0, const k_pass& pass) {
  const tile_rows<T, NR, MR> rows(a, n0, m0);
  vf acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = pass.begin == 0 ? zero() : load(state_at(pass, a, i, n0 + j));
  std::int64_t k = pass.begin;
  for (; k + W <= pass.end; k += W) fma_step<T, NR, MR, true>(acc, rows.w, rows.x, k, W);
  if (k < pass.end) fma_step<T, NR, MR, true>(acc, rows.w, rows.x, k, static_cast<int>(pass.end - k));
  if (pass.end == a.k) {
    write_tile<NR, MR>(a, n0, m0, acc, [](vf v) { return reduce_add(v); });
    return;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) store(state_at(pass, a, i, n0 + j), acc[i][j]);
}

#if defined(__AVX512BF16__)
/// bf16 weights × bf16-rounded activations with vdpbf16ps (32 products per
/// instruction): one k step of 32 for a tile, `mask` selecting the elements
/// left in K. Every loop over the accumulators is unrolled so they stay in
/// registers.
template <int NR, int MR>
[[gnu::always_inline]] inline void dot_bf16_step(__m512 (&acc)[MR][NR], const std::uint16_t* const (&w)[NR],
                                                 const std::uint16_t* const (&x)[MR], std::int64_t k, __mmask32 mask) {
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

/// The lanes of the k step at `k` that lie inside K.
inline __mmask32 dot_bf16_mask(std::int64_t k, std::int64_t k_total) {
  return k + 32 <= k_total ? ~__mmask32{0} : static_cast<__mmask32>((std::uint64_t{1} << (k_total - k)) - 1);
}

/// Pointers to the NR weight rows and MR bf16 activation rows of one tile.
template <int NR, int MR>
struct dot_bf16_rows {
  const std::uint16_t* w[NR];
  const std::uint16_t* x[MR];
  dot_bf16_rows(const gemv_args& a, std::int64_t n0, std::int64_t m0) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) w[j] = static_cast<const std::uint16_t*>(a.weights) + (n0 + j) * a.k;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) x[i] = a.x_bf16 + (m0 + i) * a.x_bf16_stride;
  }
};

template <int NR, int MR>
void gemv_tile_dot_bf16(const gemv_args& a, std::int64_t n0, std::int64_t m0) {
  const dot_bf16_rows<NR, MR> rows(a, n0, m0);
  const std::int64_t k_total = a.k;
  const void* limit = static_cast<const std::uint16_t*>(a.weights) + a.n_end * k_total;
  const bool stream = m0 == 0;
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < k_total; k += 32) {
    const __mmask32 mask = dot_bf16_mask(k, k_total);
    if (stream) prefetch_next_tile<NR>(rows.w[0], k_total * 2, k / 32, NR * 64, limit);
    dot_bf16_step<NR, MR>(acc, rows.w, rows.x, k, mask);
  }
  write_tile<NR, MR>(a, n0, m0, acc, [](__m512 v) { return _mm512_reduce_add_ps(v); });
}

template <int NR, int MR>
void gemv_tile_dot_bf16_blocked(const gemv_args& a, std::int64_t n0, std::int64_t m0, const k_pass& pass) {
  const dot_bf16_rows<NR, MR> rows(a, n0, m0);
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j)
      acc[i][j] = pass.begin == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(state_at(pass, a, i, n0 + j));
  for (std::int64_t k = pass.begin; k < pass.end; k += 32)
    dot_bf16_step<NR, MR>(acc, rows.w, rows.x, k, dot_bf16_mask(k, a.k));
  if (pass.end == a.k) {
    write_tile<NR, MR>(a, n0, m0, acc, [](__m512 v) { return _mm512_reduce_add_ps(v); });
    return;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) _mm512_storeu_ps(state_at(pass, a, i, n0 + j), acc[i][j]);
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

/// One tile over all of K (`pass` null) or over one K block.
template <elem T, int NR, int MR>
void run_tile(const gemv_args& a, std::int64_t n0, std::int64_t m0, const k_pass* pass) {
#if defined(__AVX512BF16__)
  if constexpr (T == elem::bf16) {
    if (a.x_bf16 != nullptr) {
      pass ? gemv_tile_dot_bf16_blocked<NR, MR>(a, n0, m0, *pass) : gemv_tile_dot_bf16<NR, MR>(a, n0, m0);
      return;
    }
  }
#endif
  pass ? gemv_tile_blocked<T, NR, MR>(a, n0, m0, *pass) : gemv_tile<T, NR, MR>(a, n0, m0);
}

/// Rows [m0, m0 + rows) against weight rows [n0, n0 + NR), rows <= MAX.
template <elem T, int NR, int MAX>
void run_rows(const gemv_args& a, std::int64_t n0, std::int64_t m0, std::int64_t rows, const k_pass* pass) {
  if constexpr (MAX > 1) {
    if (rows < MAX) {
      run_rows<T, NR, MAX - 1>(a, n0, m0, rows, pass);
      return;
    }
  }
  run_tile<T, NR, MAX>(a, n0, m0, pass);
}

/// Weight rows [n, n + NR) for every activation row, MAX rows per pass.
template <elem T, int NR, int MAX>
void run_columns(const gemv_args& a, std::int64_t n) {
  for (std::int64_t m0 = 0; m0 < a.m_rows; m0 += MAX)
    run_rows<T, NR, MAX>(a, n, m0, a.m_rows - m0 < MAX ? a.m_rows - m0 : MAX, nullptr);
}

/// Weight rows [n, n_end) in tiles of NR, then single rows.
template <elem T, int NR, int MAX>
void run_range(const gemv_args& a) {
  std::int64_t n = a.n_begin;
  for (; n + NR <= a.n_end; n += NR) run_columns<T, NR, MAX>(a, n);
  for (; n < a.n_end; ++n) run_columns<T, 1, MAX>(a, n);
}

/// K-blocked form for many activation rows: for each slice of MAX rows and
/// each K block, the slice's activations stay in L1 while every weight tile
/// of [n_begin, n_end) (held in L2 across slices) passes over them.
template <elem T, int NR, int MAX>
void run_blocked(const gemv_args& a) {
  for (std::int64_t m0 = 0; m0 < a.m_rows; m0 += MAX) {
    const std::int64_t rows = a.m_rows - m0 < MAX ? a.m_rows - m0 : MAX;
    for (std::int64_t k0 = 0; k0 < a.k; k0 += a.k_block) {
      const k_pass pass{k0, a.k - k0 < a.k_block ? a.k : k0 + a.k_block, a.accumulators, a.n_end - a.n_begin};
      std::int64_t n = a.n_begin;
      for (; n + NR <= a.n_end; n += NR) run_rows<T, NR, MAX>(a, n, m0, rows, &pass);
      for (; n < a.n_end; ++n) run_rows<T, 1, MAX>(a, n, m0, rows, &pass);
    }
  }
}

template <elem T>
void gemv_typed(const gemv_args& a) {
#if defined(__AVX512F__)
  if (a.k_block > 0) {
    run_blocked<T, 3, 8>(a);
  } else if (a.m_rows == 1) {
    run_range<T, 8, 1>(a);  // 8 streams in flight for a single activation row
  } else if (a.m_rows <= 4) {
    run_range<T, 4, 4>(a);
  } else {
    run_range<T, 3, 8>(a);  // 24 accumulators: up to 8 rows in one pass
  }
#else
  if (a.k_block > 0) {
    run_blocked<T, 4, max_rows>(a);
  } else {
    run_range<T, 4, max_rows>(a);
  }
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
