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
    case weight_quantization::int5_asym:
      return "int5_asym";
  }
  return "?";
}

int quantization_code_bits(weight_quantization format) {
  switch (format) {
    case weight_quantization::none:
      return 0;
    case weight_quantization::int8:
      return 8;
    case weight_quantization::int4:
    case weight_quantization::int4_asym:
      return 4;
    case weight_quantization::int5_asym:
      return 5;
  }
  return 0;
}

std::optional<weight_quantization> parse_quantization(std::string_view name) {
  for (auto format : {weight_quantization::none, weight_quantization::int8, weight_quantization::int4,
                      weight_quantization::int4_asym, weight_quantization::int5_asym}) {
    if (quantization_name(format) == name) return format;
  }
  return std::nullopt;
}

std::optional<weight_quantization> lm_head_quantization(weight_quantization layers, std::string_view head,
                                                        bool head_refined) {
  if (head != "auto") return parse_quantization(head);
  if (layers == weight_quantization::none) return weight_quantization::none;
  const bool few_bits = quantization_code_bits(layers) < 8;
  return few_bits && head_refined ? weight_quantization::int4 : weight_quantization::int8;
}

}  // namespace troupe
