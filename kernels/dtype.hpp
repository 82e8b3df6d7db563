#pragma once
// Element types the backends store and compute in, and scalar conversions
// between them. Host-only helpers; device code has its own intrinsics.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace troupe {

/// Element type of a tensor.
enum class dtype : std::uint8_t { f32, f16, bf16 };

/// Bytes per element of `t`.
constexpr std::size_t dtype_size(dtype t) { return t == dtype::f32 ? 4 : 2; }

/// Lower-case name as used in CLI flags and errors ("f32", "f16", "bf16").
constexpr std::string_view dtype_name(dtype t) {
  switch (t) {
    case dtype::f32:
      return "f32";
    case dtype::f16:
      return "f16";
    case dtype::bf16:
      return "bf16";
  }
  return "?";
}

/// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16".
std::optional<dtype> parse_dtype(std::string_view name);

/// bf16 (raw bits) to float: exact.
inline float bf16_to_float(std::uint16_t bits) {
  std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

/// float to bf16 (raw bits), round to nearest even; NaN stays NaN.
inline std::uint16_t float_to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

/// IEEE half (raw bits) to float: exact.
float f16_to_float(std::uint16_t bits);

/// float to IEEE half (raw bits), round to nearest even, overflow to inf.
std::uint16_t float_to_f16(float value);

/// Converts `count` elements from `src` (type `from`) to `dst` (type `to`).
void convert_elements(const void* src, dtype from, void* dst, dtype to, std::size_t count);

}  // namespace troupe
