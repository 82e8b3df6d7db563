#pragma once
// Row-wise kernels (conversions, norms, SiLU-mul, RoPE, softmax helpers).
// Included only by the ISA units.

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

inline void from_f32(const float* src, void* dst, elem type, std::int64_t count) {
  std::int64_t i = 0;
  if (type == elem::f32) {
    float* out = static_cast<float*>(dst);
    for (; i < count; ++i) out[i] = src[i];
    return;
  }
  auto* out = static_cast<std::uint16_t*>(dst);
  const bool bf16 = type == elem::bf16;
  for (; i + W <= count; i += W) bf16 ? store_bf16(out + i, load(src + i)) : store_f16(out + i, load(src + i));
  if (i < count) {
    const int rest = static_cast<int>(count - i);
    const vf v = load_tail(src + i, rest);
    bf16 ? store_bf16_tail(out + i, v, rest) : store_f16_tail(out + i, v, rest);
  }
}

inline void to_f32(const void* src, elem type, float* dst, std::int64_t count) {
  std::int64_t i = 0;
  if (type == elem::f32) {
    const float* in = static_cast<const float*>(src);
    for (; i < count; ++i) dst[i] = in[i];
    return;
  }
  const auto* in = static_cast<const std::uint16_t*>(src);
  const bool bf16 = type == elem::bf16;
  for (; i + W <= count; i += W) store(dst + i, bf16 ? load_bf16(in + i) : load_f16(in + i));
  if (i < count) {
    const int rest = static_cast<int>(count - i);
    store_tail(dst + i, bf16 ? load_bf16_tail(in + i, rest) : load_f16_tail(in + i, rest), rest);
  }
}

inline float sum_of_squares(const float* x, std::int64_t n) {
  vf acc0 = zero(), acc1 = zero();
  std::int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const vf a = load(x + i), b = load(x + i + W);
    acc0 = fma(a, a, acc0);
    acc1 = fma(b, b, acc1);
  }
  for (; i + W <= n; i += W) {
    const vf a = load(x + i);
    acc0 = fma(a, a, acc0);
  }
  if (i < n) {
    const vf a = load_tail(x + i, static_cast<int>(n - i));
    acc1 = fma(a, a, acc1);
  }
  return reduce_add(add(acc0, acc1));
}

// HF LlamaRMSNorm in f32: weight * (x * rsqrt(mean(x²) + eps)).
inline void scale_by_weight(const float* x, const float* weight, float inv_rms, std::int64_t n, float* out) {
  const vf r = set1(inv_rms);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) store(out + i, mul(load(weight + i), mul(load(x + i), r)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    store_tail(out + i, mul(load_tail(weight + i, rest), mul(load_tail(x + i, rest), r)), rest);
  }
}

inline float inverse_rms(float sum_sq, std::int64_t n, float eps) {
  const float mean = sum_sq / static_cast<float>(n);
  return 1.0f / __builtin_sqrtf(mean + eps);
}

inline void rms_norm_row(const float* x, const float* weight, float eps, std::int64_t n, float* out) {
  scale_by_weight(x, weight, inverse_rms(sum_of_squares(x, n), n, eps), n, out);
}

inline void add_rms_norm_row(float* residual, const float* x, const float* weight, float eps, std::int64_t n,
                             float* out) {
  std::int64_t i = 0;
  for (; i + W <= n; i += W) store(residual + i, add(load(residual + i), load(x + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    store_tail(residual + i, add(load_tail(residual + i, rest), load_tail(x + i, rest)), rest);
  }
  rms_norm_row(residual, weight, eps, n, out);
}

inline vf silu_times(vf gate, vf up) { return mul(div(gate, add(set1(1.0f), exp(sub(zero(), gate)))), up); }

inline void silu_mul_row(const float* gate, const float* up, std::int64_t n, float* out) {
  std::int64_t i = 0;
  for (; i + W <= n; i += W) store(out + i, silu_times(load(gate + i), load(up + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    store_tail(out + i, silu_times(load_tail(gate + i, rest), load_tail(up + i, rest)), rest);
  }
}

// HF rotate_half: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), products
// rounded before the sum like torch's q * cos + rotate_half(q) * sin.
inline void rotate_pairs(float* lo, float* hi, vf c, vf s, int rest) {
  const vf x1 = rest == 0 ? load(lo) : load_tail(lo, rest);
  const vf x2 = rest == 0 ? load(hi) : load_tail(hi, rest);
  const vf r1 = sub(mul(x1, c), mul(x2, s));
  const vf r2 = add(mul(x2, c), mul(x1, s));
  if (rest == 0) {
    store(lo, r1);
    store(hi, r2);
  } else {
    store_tail(lo, r1, rest);
    store_tail(hi, r2, rest);
  }
}

inline void rope_row(float* x, int heads, int head_dim, int rot_dim, const float* cos, const float* sin) {
  const int half = rot_dim / 2;
  for (int h = 0; h < heads; ++h) {
    float* head = x + static_cast<std::int64_t>(h) * head_dim;
    int i = 0;
    for (; i + W <= half; i += W) rotate_pairs(head + i, head + half + i, load(cos + i), load(sin + i), 0);
    if (i < half) {
      const int rest = half - i;
      rotate_pairs(head + i, head + half + i, load_tail(cos + i, rest), load_tail(sin + i, rest), rest);
    }
  }
}

inline float row_max(const float* x, std::int64_t n) {
  const float neg_inf = -__builtin_inff();
  vf acc = set1(neg_inf);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) acc = max(acc, load(x + i));
  float best = reduce_max(acc);
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  return best;
}

inline double sum_exp(const float* x, std::int64_t n, float shift) {
  // Each vector's lanes are summed in f32, the vectors in double: identical
  // values (a flat tail of 100k ids) must not pile up rounding error.
  const vf s = set1(shift);
  double total = 0.0;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) total += reduce_add(exp(sub(load(x + i), s)));
  for (; i < n; ++i) total += __builtin_expf(x[i] - shift);
  return total;
}

inline void exp_scaled(const float* x, std::int64_t n, float scale, float shift, float* out) {
  const vf sc = set1(scale), sh = set1(shift);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) store(out + i, exp(sub(mul(load(x + i), sc), sh)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    store_tail(out + i, exp(sub(mul(load_tail(x + i, rest), sc), sh)), rest);
  }
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
