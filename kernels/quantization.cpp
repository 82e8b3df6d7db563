#include "kernels/quantization.hpp"

namespace troupe {

std::string_view quantization_name(weight_quantization format) {
  switch (format) {
    case weight_quantization::none:
      return "none";
    case weight_quantization::int8:
      return "int8";
    case weight_quantization::int4:
      return "int4";
    case weight_quantization::int4_asym:
      return "int4_asym";
  }
  return "?";
}

std::optional<weight_quantization> parse_quantization(std::string_view name) {
  for (auto format : {weight_quantization::none, weight_quantization::int8, weight_quantization::int4,
                      weight_quantization::int4_asym}) {
    if (quantization_name(format) == name) return format;
  }
  return std::nullopt;
}

std::optional<weight_quantization> lm_head_quantization(weight_quantization layers, std::string_view head,
                                                        bool head_refined) {
  if (head != "auto") return parse_quantization(head);
  if (layers == weight_quantization::none) return weight_quantization::none;
  const bool four_bit = layers == weight_quantization::int4 || layers == weight_quantization::int4_asym;
  return four_bit && head_refined ? weight_quantization::int4 : weight_quantization::int8;
}

}  // namespace troupe
