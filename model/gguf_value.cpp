// Metadata value types of the GGUF reader: names, sizes and numeric access.

#include <cstring>

#include "model/gguf.hpp"

namespace troupe {

std::string_view gguf_type_name(gguf_type type) {
  constexpr std::string_view names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                        "bool",  "string", "array",  "uint64", "int64",  "float64"};
  const auto index = static_cast<std::uint32_t>(type);
  return index < std::size(names) ? names[index] : "?";
}

std::uint64_t gguf_scalar_bytes(gguf_type type) {
  switch (type) {
    case gguf_type::uint8:
    case gguf_type::int8:
    case gguf_type::boolean:
      return 1;
    case gguf_type::uint16:
    case gguf_type::int16:
      return 2;
    case gguf_type::uint32:
    case gguf_type::int32:
    case gguf_type::float32:
      return 4;
    case gguf_type::uint64:
    case gguf_type::int64:
    case gguf_type::float64:
      return 8;
    default:
      return 0;
  }
}

bool gguf_value::is_integer() const {
  return type != gguf_type::boolean && type != gguf_type::float32 && type != gguf_type::float64 &&
         gguf_scalar_bytes(type) != 0;
}

double gguf_value::number_at(std::uint64_t i) const {
  const std::byte* at = elements.data() + i * gguf_scalar_bytes(element_type);
  const auto load = [at]<class T>(T) {
    T v;
    std::memcpy(&v, at, sizeof v);
    return static_cast<double>(v);
  };
  switch (element_type) {
    case gguf_type::uint8:
    case gguf_type::boolean:
      return load(std::uint8_t{});
    case gguf_type::int8:
      return load(std::int8_t{});
    case gguf_type::uint16:
      return load(std::uint16_t{});
    case gguf_type::int16:
      return load(std::int16_t{});
    case gguf_type::uint32:
      return load(std::uint32_t{});
    case gguf_type::int32:
      return load(std::int32_t{});
    case gguf_type::float32:
      return load(float{});
    case gguf_type::uint64:
      return load(std::uint64_t{});
    case gguf_type::int64:
      return load(std::int64_t{});
    case gguf_type::float64:
      return load(double{});
    default:
      return 0.0;
  }
}

}  // namespace troupe
