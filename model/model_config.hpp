#pragma once
// The model's shape and numerics as HF `config.json` describes them, for the
// Llama family (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM). Accepts both the transformers 4 form (top-level
// `rope_theta`, `rope_scaling`, `torch_dtype`) and the transformers 5 form
// (`rope_parameters` carrying `rope_theta`, `dtype`).
//
// Sliding-window attention is not implemented. A window that some layer uses
// (Mistral: `sliding_window` set; Qwen2/3: `use_sliding_window` true and a
// layer of type `sliding_attention`) is accepted by capping the usable
// context at the window: up to that many tokens, sliding-window attention
// and full attention are the same computation, so results stay exact.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/rope_spec.hpp"

namespace troupe {

/// The supported model classes.
enum class model_architecture : std::uint8_t { llama, mistral, qwen2, qwen3 };

/// HF class name: "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM".
std::string_view architecture_class_name(model_architecture arch);
/// HF `model_type` and CLI name: "llama", "mistral", "qwen2", "qwen3".
std::string_view architecture_model_type(model_architecture arch);
/// Parses a `model_type` / CLI name ("llama", ...); nullopt when unknown.
std::optional<model_architecture> parse_architecture(std::string_view name);

/// Everything the forward pass and the engine need from `config.json`.
/// Sizes are element counts; every field is validated (positive, heads
/// divisible, ...) by parse_model_config.
struct model_config {
  model_architecture architecture = model_architecture::llama;
  std::int64_t hidden_size = 0;        ///< H
  std::int64_t intermediate_size = 0;  ///< MLP width
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;      ///< query heads
  std::int64_t num_key_value_heads = 0;      ///< divides num_attention_heads (GQA)
  std::int64_t head_dim = 0;                 ///< explicit `head_dim`, else H / heads; even
  std::int64_t vocab_size = 0;               ///< V: rows of embed_tokens and lm_head
  std::int64_t max_position_embeddings = 0;  ///< as written in the config
  std::int64_t max_context_length = 0;  ///< usable context: max_position_embeddings, capped by a used sliding window
  std::optional<std::int64_t> sliding_window;  ///< set only when some layer would use it (see the file comment)
  double rms_norm_eps = 1e-6;
  rope_spec rope;                    ///< head_dim, theta and scaling filled in
  bool tie_word_embeddings = false;  ///< lm_head shares embed_tokens
  bool qkv_bias = false;             ///< q/k/v projections have biases (Qwen2 always; Llama/Qwen3 `attention_bias`)
  bool o_bias = false;               ///< o_proj has a bias (Llama/Qwen3 `attention_bias`)
  bool qk_norm = false;              ///< per-head RMSNorm of q and k before RoPE (Qwen3)
  std::optional<dtype> torch_dtype;  ///< `dtype` / `torch_dtype` when it names f32/f16/bf16
  std::optional<std::int64_t> bos_token_id;
  std::optional<std::int64_t> pad_token_id;
  std::vector<std::int64_t> eos_token_ids;  ///< `eos_token_id`, int or list; may be empty

  /// Width of the q projection output: heads × head_dim.
  std::int64_t q_size() const { return num_attention_heads * head_dim; }
  /// Width of each of the k and v projection outputs: kv heads × head_dim.
  std::int64_t kv_size() const { return num_key_value_heads * head_dim; }
};

/// Parses and validates the text of a `config.json`. Throws
/// std::runtime_error starting with `source` and naming the field, e.g.
/// "config.json: field 'num_key_value_heads' (3) must divide num_attention_heads (8)".
model_config parse_model_config(std::string_view json_text, std::string_view source = "config.json");

/// Reads and parses `model_dir`/config.json.
model_config load_model_config(const std::filesystem::path& model_dir);

}  // namespace troupe
