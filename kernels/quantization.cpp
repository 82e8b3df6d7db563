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
    case weight_quantization::int4_nl:
      return "int4_nl";
    case weight_quantization::int6:
      return "int6";
    case weight_quantization::int4_g16:
      return "int4_g16";
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
    case weight_quantization::int4_nl:
    case weight_quantization::int4_g16:
      return 4;
    case weight_quantization::int5_asym:
      return 5;
    case weight_quantization::int6:
      return 6;
  }
  return 0;
}

namespace {

constexpr weight_quantization all_formats[] = {weight_quantization::none,      weight_quantization::int8,
                                               weight_quantization::int4,      weight_quantization::int4_asym,
                                               weight_quantization::int5_asym, weight_quantization::int4_nl,
                                               weight_quantization::int6,      weight_quantization::int4_g16};

}  // namespace

std::optional<weight_quantization> parse_quantization(std::string_view name) {
  for (auto format : all_formats) {
    if (quantization_name(format) == name) return format;
  }
  return std::nullopt;
}

std::vector<std::string> quantization_choices() {
  std::vector<std::string> choices{"auto"};
  for (auto format : all_formats) choices.emplace_back(quantization_name(format));
  return choices;
}

std::string quantization_choices_text() {
  std::string text;
  for (const std::string& choice : quantization_choices()) text += (text.empty() ? "" : ", ") + choice;
  return text;
}

bool quantization_group_offsets(weight_quantization format) {
  return format == weight_quantization::int4_asym || format == weight_quantization::int5_asym;
}

bool quantization_half_group_scales(weight_quantization format) {
  return format == weight_quantization::int6 || format == weight_quantization::int4_g16;
}

int half_group_code_offset(weight_quantization format) { return format == weight_quantization::int6 ? 32 : 8; }

float stored_code_value(weight_quantization format, int code, float scale, float offset) {
  if (format == weight_quantization::int4_nl) return scale * static_cast<float>(int4_nl_levels[code & 0x0f]);
  if (quantization_half_group_scales(format)) return scale * static_cast<float>(code - half_group_code_offset(format));
  return scale * static_cast<float>(code) + (quantization_group_offsets(format) ? offset : -8.0f * scale);
}

std::optional<weight_quantization> lm_head_quantization(weight_quantization layers, std::string_view head,
                                                        bool head_refined) {
  if (head != "auto") return parse_quantization(head);
  if (layers == weight_quantization::none) return weight_quantization::none;
  const bool few_bits = quantization_code_bits(layers) < 8;
  return few_bits && head_refined ? weight_quantization::int4 : weight_quantization::int8;
}

}  // namespace troupe
