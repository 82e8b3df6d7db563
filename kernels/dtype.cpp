#include "kernels/dtype.hpp"

namespace troupe {

std::optional<dtype> parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "F32") return dtype::f32;
  if (name == "f16" || name == "float16" || name == "F16") return dtype::f16;
  if (name == "bf16" || name == "bfloat16" || name == "BF16") return dtype::bf16;
  return std::nullopt;
}

float f16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t out;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else {  // subnormal: renormalise into a float exponent
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      out = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else {
    out = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &out, sizeof value);
  return value;
}

std::uint16_t float_to_f16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs_bits >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs_bits < 0x38800000u) {                                                    // result is subnormal or zero
    if (abs_bits < 0x33000000u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t exponent = abs_bits >> 23;
    const std::uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14 + (113 - exponent) - 1
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t rounded = abs_bits + 0xfffu + ((abs_bits >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

namespace {

// Elements per pass of a conversion loop: a constant trip count, which GCC's
// -O2 cost model vectorises (it leaves a loop of unknown count scalar).
constexpr std::size_t convert_chunk = 16;

template <class Convert>
void for_each_element(std::size_t count, Convert convert) {
  std::size_t i = 0;
  for (; i + convert_chunk <= count; i += convert_chunk) {
    for (std::size_t j = i; j < i + convert_chunk; ++j) convert(j);
  }
  for (; i < count; ++i) convert(i);
}

// One loop per (from, to) pair, with the type switches outside it, so that
// it vectorises: checkpoint loading converts whole embedding tables and LM
// heads through here.
template <class Load>
void store_all(Load load, void* dst, dtype to, std::size_t count) {
  auto* floats = static_cast<float*>(dst);
  auto* halves = static_cast<std::uint16_t*>(dst);
  switch (to) {
    case dtype::f32:
      for_each_element(count, [&](std::size_t i) { floats[i] = load(i); });
      return;
    case dtype::f16:
      for_each_element(count, [&](std::size_t i) { halves[i] = float_to_f16(load(i)); });
      return;
    case dtype::bf16:
      for_each_element(count, [&](std::size_t i) { halves[i] = float_to_bf16(load(i)); });
      return;
  }
}

}  // namespace

void convert_elements(const void* src, dtype from, void* dst, dtype to, std::size_t count) {
  if (from == to) {
    std::memcpy(dst, src, count * dtype_size(from));
    return;
  }
  const auto* halves = static_cast<const std::uint16_t*>(src);
  switch (from) {
    case dtype::f32:
      store_all([src](std::size_t i) { return static_cast<const float*>(src)[i]; }, dst, to, count);
      return;
    case dtype::f16:
      store_all([halves](std::size_t i) { return f16_to_float(halves[i]); }, dst, to, count);
      return;
    case dtype::bf16:
      store_all([halves](std::size_t i) { return bf16_to_float(halves[i]); }, dst, to, count);
      return;
  }
}

}  // namespace troupe
