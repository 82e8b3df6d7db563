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

float load_element(const void* src, dtype type, std::size_t i) {
  switch (type) {
    case dtype::f32:
      return static_cast<const float*>(src)[i];
    case dtype::f16:
      return f16_to_float(static_cast<const std::uint16_t*>(src)[i]);
    case dtype::bf16:
      return bf16_to_float(static_cast<const std::uint16_t*>(src)[i]);
  }
  return 0.0f;
}

void store_element(void* dst, dtype type, std::size_t i, float value) {
  switch (type) {
    case dtype::f32:
      static_cast<float*>(dst)[i] = value;
      return;
    case dtype::f16:
      static_cast<std::uint16_t*>(dst)[i] = float_to_f16(value);
      return;
    case dtype::bf16:
      static_cast<std::uint16_t*>(dst)[i] = float_to_bf16(value);
      return;
  }
}

}  // namespace

void convert_elements(const void* src, dtype from, void* dst, dtype to, std::size_t count) {
  if (from == to) {
    std::memcpy(dst, src, count * dtype_size(from));
    return;
  }
  for (std::size_t i = 0; i < count; ++i) store_element(dst, to, i, load_element(src, from, i));
}

}  // namespace troupe
