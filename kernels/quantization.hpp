#pragma once
// Weight-only quantisation formats a checkpoint can be converted to at load
// (the `quantization` knob, `--quantization`). Formats and kernels: the
// backends' READMEs.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// How linear-layer weights are stored and multiplied. The 4- and 5-bit
/// formats hold a scale (and offset) per group of 32 inputs: f16 each, or
/// where the backend keeps block factors (the CPU, kernels/README.md) a byte
/// code under an f16 factor per 256 inputs. int6 and int4_g16 hold a scale
/// per 16 inputs, always as block factors.
enum class weight_quantization : std::uint8_t {
  none = 0,       ///< the checkpoint's type (bf16, f16 or f32)
  int8 = 1,       ///< int8, one f32 scale per output row (symmetric)
  int4 = 2,       ///< int4, one f16 scale per group of 32 inputs (symmetric, codes -8..7)
  int4_asym = 3,  ///< int4, f16 scale and f16 offset per group of 32 inputs
  int5_asym = 4,  ///< 5-bit codes 0..31, f16 scale and f16 offset per group of 32 inputs
  int4_nl = 5,    ///< 4-bit codes naming int4_nl_levels, one f16 scale per group of 32 inputs
  /// 6-bit codes 0..63, w = scale · (code − 32), a scale per 16 inputs: a
  /// signed byte under an f16 factor per 256 inputs (GGUF Q6_K as stored;
  /// 6.5625 bits a weight). The CUDA backend holds it as int8.
  int6 = 6,
  /// 4-bit codes 0..15, w = scale · (code − 8), a scale per 16 inputs as
  /// int6 holds them (4.5625 bits a weight). GGUF Q3_K's 3-bit codes are
  /// codes 4..11 of it, so a Q3_K matrix is held exactly. The CUDA backend
  /// holds it as int8.
  int4_g16 = 7,
};

/// True for the formats with a scale per half group of 16 inputs (int6,
/// int4_g16; w = scale · (code − half_group_code_offset)).
bool quantization_half_group_scales(weight_quantization format);

/// The code a half-group format's zero weight has: 32 for int6, 8 for int4_g16.
int half_group_code_offset(weight_quantization format);

/// int4_nl's 16 levels: w = scale · int4_nl_levels[code]. They are GGUF
/// IQ4_NL / IQ4_XS's, so those files' blocks are held exactly; denser near
/// zero, where most weights lie, than int4's evenly spaced −8..7.
inline constexpr std::int8_t int4_nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                   1,    13,   25,  38,  53,  69,  89,  113};

/// "none", "int8", "int4", "int4_asym", "int5_asym", "int4_nl", "int6", "int4_g16".
std::string_view quantization_name(weight_quantization format);

/// Parses a quantization_name() string.
std::optional<weight_quantization> parse_quantization(std::string_view name);

/// "auto" and every quantization_name(), in enum order: the values of the
/// quantisation flags and knobs.
std::vector<std::string> quantization_choices();

/// quantization_choices() as "auto, none, int8, ..." for messages.
std::string quantization_choices_text();

/// Bits per code of `format` (0 for none): 8, 4, 4, 5, 4, 6, 4.
int quantization_code_bits(weight_quantization format);

/// True for the formats with an f16 offset per group beside the scale
/// (int4_asym, int5_asym: w = scale · code + offset).
bool quantization_group_offsets(weight_quantization format);

/// The weight a 4-, 5- or 6-bit `code` of `format` stands for in a group of
/// `scale` (and, for the formats with group offsets, `offset`, else
/// ignored): scale · (code − 8) for int4, scale · int4_nl_levels[code] for
/// int4_nl, scale · code + offset for int4_asym / int5_asym, scale · (code −
/// 32) for int6 and scale · (code − 8) for int4_g16.
float stored_code_value(weight_quantization format, int code, float scale, float offset);

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
