#pragma once
// Weight-only quantisation formats a checkpoint can be converted to at load
// (the `quantization` knob, `--quantization`). Formats and kernels: the
// backends' READMEs.

#include <cstdint>
#include <optional>
#include <string_view>

namespace troupe {

/// How linear-layer weights are stored and multiplied.
enum class weight_quantization : std::uint8_t {
  none = 0,       ///< the checkpoint's type (bf16, f16 or f32)
  int8 = 1,       ///< int8, one f32 scale per output row (symmetric)
  int4 = 2,       ///< int4, one f16 scale per group of 32 inputs (symmetric, codes -8..7)
  int4_asym = 3,  ///< int4, f16 scale and f16 offset per group of 32 inputs
  int5_asym = 4,  ///< 5-bit codes 0..31, f16 scale and f16 offset per group of 32 inputs (cpu only)
};

/// "none", "int8", "int4", "int4_asym", "int5_asym".
std::string_view quantization_name(weight_quantization format);

/// Parses a quantization_name() string.
std::optional<weight_quantization> parse_quantization(std::string_view name);

/// Bits per code of `format` (0 for none): 8, 4, 4, 5.
int quantization_code_bits(weight_quantization format);

/// The LM head's format for linear layers in `layers` and the choice
/// `head` ("auto" or a quantization_name()). auto keeps an unquantised
/// model's head; beside 4- or 5-bit layers it is int4 when `head_refined` (a head
/// tied to the embeddings on a backend that rescores its best logits
/// exactly, llama_model), int8 otherwise, which keeps greedy agreement with
/// bf16 where a plain int4 head loses about two points (the
/// `lm_head_quantization` knob, docs/operations.md). nullopt for an
/// unknown name.
std::optional<weight_quantization> lm_head_quantization(weight_quantization layers, std::string_view head,
                                                        bool head_refined);

}  // namespace troupe
