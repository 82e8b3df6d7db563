#include "model/model_config.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/checkpoint_json.hpp"
#include "model/python_json.hpp"

namespace troupe {

namespace {

constexpr std::array<model_architecture, 4> all_architectures = {model_architecture::llama, model_architecture::mistral,
                                                                 model_architecture::qwen2, model_architecture::qwen3};

// Upper bounds that keep every product of sizes far from overflow while
// admitting any real model.
constexpr std::int64_t max_hidden = std::int64_t{1} << 20;
constexpr std::int64_t max_vocab = std::int64_t{1} << 26;
constexpr std::int64_t max_layers = 4096;
constexpr std::int64_t max_heads = 4096;
constexpr std::int64_t max_positions = std::int64_t{1} << 32;

model_architecture detect_architecture(const json_field& config, std::string_view source) {
  std::string supported;
  for (auto arch : all_architectures)
    supported += (supported.empty() ? "" : ", ") + std::string(architecture_class_name(arch));
  if (config.has("architectures")) {
    const std::vector<std::string> names = get_string_list(config, "architectures");
    if (names.empty()) config.fail("architectures", "is an empty list");
    for (auto arch : all_architectures) {
      if (names.front() == architecture_class_name(arch)) return arch;
    }
    throw std::runtime_error(std::string(source) + ": unsupported architecture '" + names.front() +
                             "' (supported: " + supported + ")");
  }
  const std::optional<std::string> model_type = config.get_string("model_type");
  if (!model_type) config.fail("architectures", "is missing (and there is no model_type)");
  if (auto arch = parse_architecture(*model_type)) return *arch;
  throw std::runtime_error(std::string(source) + ": unsupported architecture: model_type '" + *model_type +
                           "' (supported: " + supported + ")");
}

std::int64_t require_in_range(const json_field& config, std::string_view key, std::int64_t low, std::int64_t high) {
  return config.at(key).integer(low, high);
}

void read_sizes(const json_field& config, model_config& out) {
  out.hidden_size = require_in_range(config, "hidden_size", 1, max_hidden);
  out.intermediate_size = require_in_range(config, "intermediate_size", 1, max_hidden * 4);
  out.num_hidden_layers = require_in_range(config, "num_hidden_layers", 1, max_layers);
  out.num_attention_heads = require_in_range(config, "num_attention_heads", 1, max_heads);
  out.num_key_value_heads = config.has("num_key_value_heads")
                                ? require_in_range(config, "num_key_value_heads", 1, max_heads)
                                : out.num_attention_heads;
  if (out.num_attention_heads % out.num_key_value_heads != 0) {
    config.fail("num_key_value_heads", "(" + std::to_string(out.num_key_value_heads) +
                                           ") must divide num_attention_heads (" +
                                           std::to_string(out.num_attention_heads) + ")");
  }
  if (config.has("head_dim")) {
    out.head_dim = require_in_range(config, "head_dim", 2, max_hidden);
  } else {
    if (out.hidden_size % out.num_attention_heads != 0) {
      config.fail("hidden_size", "(" + std::to_string(out.hidden_size) + ") is not divisible by num_attention_heads (" +
                                     std::to_string(out.num_attention_heads) + ") and there is no head_dim");
    }
    out.head_dim = out.hidden_size / out.num_attention_heads;
  }
  if (out.head_dim % 2 != 0) config.fail("head_dim", "(" + std::to_string(out.head_dim) + ") must be even for RoPE");
  if (out.num_attention_heads * out.head_dim > max_hidden)
    config.fail("head_dim", "times num_attention_heads is too large");
  out.vocab_size = require_in_range(config, "vocab_size", 1, max_vocab);
  out.max_position_embeddings = config.has("max_position_embeddings")
                                    ? require_in_range(config, "max_position_embeddings", 1, max_positions)
                                    : 2048;
}

double require_positive(const json_field& reader, std::string_view key, std::optional<double> value) {
  if (!value) reader.fail(key, "is missing");
  if (!std::isfinite(*value) || *value <= 0.0) reader.fail(key, "(" + python_float_repr(*value) + ") must be positive");
  return *value;
}

// The rope dict: `rope_scaling` wins over `rope_parameters`, as in transformers.
std::optional<json_field> rope_object(const json_field& config) {
  if (auto scaling = config.get_object("rope_scaling")) return scaling;
  return config.get_object("rope_parameters");
}

void read_rope_scaling(const json_field& rope, std::string_view type, model_config& out) {
  if (type == "default") return;
  if (type == "linear") {
    out.rope.scaling = rope_scaling_kind::linear;
  } else if (type == "dynamic") {
    out.rope.scaling = rope_scaling_kind::dynamic;
  } else if (type == "llama3") {
    out.rope.scaling = rope_scaling_kind::llama3;
  } else {
    rope.fail(rope.has("rope_type") ? "rope_type" : "type",
              "'" + std::string(type) + "' is not supported (supported: default, linear, dynamic, llama3)");
  }
  out.rope.factor = require_positive(rope, "factor", rope.get_number("factor"));
  if (out.rope.scaling != rope_scaling_kind::llama3) return;
  out.rope.low_freq_factor = require_positive(rope, "low_freq_factor", rope.get_number("low_freq_factor"));
  out.rope.high_freq_factor = require_positive(rope, "high_freq_factor", rope.get_number("high_freq_factor"));
  if (out.rope.high_freq_factor <= out.rope.low_freq_factor) {
    rope.fail("high_freq_factor", "must be greater than low_freq_factor");
  }
  out.rope.original_max_position =
      rope.get_int("original_max_position_embeddings").value_or(out.max_position_embeddings);
  if (out.rope.original_max_position <= 0) rope.fail("original_max_position_embeddings", "must be positive");
}

void read_rope(const json_field& config, model_config& out) {
  out.rope = rope_spec{};
  out.rope.head_dim = static_cast<int>(out.head_dim);
  out.rope.max_position_embeddings = out.max_position_embeddings;
  std::optional<double> theta = config.get_number("rope_theta");
  std::string type = "default";
  const std::optional<json_field> rope = rope_object(config);
  if (rope) {
    for (const auto& [key, value] : rope->object()) {
      if (value.is_object())
        rope->fail(std::string_view(key.data(), key.size()),
                   "is nested: per-layer-type rope parameters are not supported");
    }
    type = rope->get_string("rope_type").value_or(rope->get_string("type").value_or("default"));
    if (auto nested_theta = rope->get_number("rope_theta")) theta = nested_theta;
    if (rope->get_number("partial_rotary_factor").value_or(1.0) != 1.0) {
      rope->fail("partial_rotary_factor", "other than 1 is not supported");
    }
    read_rope_scaling(*rope, type, out);
  }
  out.rope.theta = theta ? require_positive(config, "rope_theta", theta) : 10000.0;
  if (config.get_number("partial_rotary_factor").value_or(1.0) != 1.0) {
    config.fail("partial_rotary_factor", "other than 1 is not supported");
  }
}

// Whether any layer would run sliding-window attention in transformers.
bool uses_sliding_window(const json_field& config, const model_config& out, bool window_set) {
  if (!window_set) return false;
  if (out.architecture == model_architecture::mistral) return true;
  if (out.architecture == model_architecture::llama) return false;
  if (!config.get_bool("use_sliding_window").value_or(false)) return false;
  const std::vector<std::string> layer_types = get_string_list(config, "layer_types");
  if (layer_types.empty()) {
    return out.num_hidden_layers > config.get_int("max_window_layers").value_or(28);
  }
  return std::find(layer_types.begin(), layer_types.end(), "sliding_attention") != layer_types.end();
}

void read_sliding_window(const json_field& config, model_config& out) {
  const std::vector<std::string> layer_types = get_string_list(config, "layer_types");
  if (!layer_types.empty() && static_cast<std::int64_t>(layer_types.size()) != out.num_hidden_layers) {
    config.fail("layer_types", "has " + std::to_string(layer_types.size()) + " entries for " +
                                   std::to_string(out.num_hidden_layers) + " layers");
  }
  for (const std::string& type : layer_types) {
    if (type != "full_attention" && type != "sliding_attention") {
      config.fail("layer_types", "has unsupported layer type '" + type + "'");
    }
  }
  const std::optional<std::int64_t> window = config.get_int("sliding_window");
  out.max_context_length = out.max_position_embeddings;
  // Linear and dynamic NTK scaling stretch the trained positions by `factor`
  // (llama3 configs already state the stretched length), as vLLM derives it.
  if (out.rope.scaling == rope_scaling_kind::linear || out.rope.scaling == rope_scaling_kind::dynamic)
    out.max_context_length =
        static_cast<std::int64_t>(static_cast<double>(out.max_position_embeddings) * out.rope.factor);
  if (!uses_sliding_window(config, out, window.has_value())) return;
  if (*window <= 0) config.fail("sliding_window", "(" + std::to_string(*window) + ") must be positive");
  if (*window < out.max_context_length) {
    out.sliding_window = window;
    out.max_context_length = *window;
  }
}

void read_token_ids(const json_field& config, model_config& out) {
  out.bos_token_id = config.get_int("bos_token_id");
  out.pad_token_id = config.get_int("pad_token_id");
  out.eos_token_ids = get_int_or_int_list(config, "eos_token_id");
  const auto check = [&](std::string_view key, std::int64_t id) {
    if (id < 0) config.fail(key, "(" + std::to_string(id) + ") must not be negative");
  };
  if (out.bos_token_id) check("bos_token_id", *out.bos_token_id);
  if (out.pad_token_id) check("pad_token_id", *out.pad_token_id);
  for (auto id : out.eos_token_ids) check("eos_token_id", id);
}

void read_features(const json_field& config, model_config& out) {
  if (auto act = config.get_string("hidden_act"); act && *act != "silu") {
    config.fail("hidden_act", "'" + *act + "' is not supported (only silu)");
  }
  if (config.get_bool("mlp_bias").value_or(false)) config.fail("mlp_bias", "true is not supported");
  const bool attention_bias = config.get_bool("attention_bias").value_or(false);
  switch (out.architecture) {
    case model_architecture::qwen2:
      out.qkv_bias = true;
      break;
    case model_architecture::mistral:
      break;
    case model_architecture::llama:
    case model_architecture::qwen3:
      out.qkv_bias = out.o_bias = attention_bias;
      break;
  }
  out.qk_norm = out.architecture == model_architecture::qwen3;
  out.tie_word_embeddings = config.get_bool("tie_word_embeddings").value_or(false);
  const std::optional<double> eps = config.get_number("rms_norm_eps");
  out.rms_norm_eps = eps ? require_positive(config, "rms_norm_eps", eps) : 1e-6;
  std::optional<std::string> type_name = config.get_string("dtype");
  if (!type_name) type_name = config.get_string("torch_dtype");
  if (type_name) out.torch_dtype = parse_dtype(*type_name);
}

}  // namespace

std::string_view architecture_class_name(model_architecture arch) {
  switch (arch) {
    case model_architecture::llama:
      return "LlamaForCausalLM";
    case model_architecture::mistral:
      return "MistralForCausalLM";
    case model_architecture::qwen2:
      return "Qwen2ForCausalLM";
    case model_architecture::qwen3:
      return "Qwen3ForCausalLM";
  }
  return "?";
}

std::string_view architecture_model_type(model_architecture arch) {
  switch (arch) {
    case model_architecture::llama:
      return "llama";
    case model_architecture::mistral:
      return "mistral";
    case model_architecture::qwen2:
      return "qwen2";
    case model_architecture::qwen3:
      return "qwen3";
  }
  return "?";
}

std::optional<model_architecture> parse_architecture(std::string_view name) {
  for (auto arch : all_architectures) {
    if (name == architecture_model_type(arch)) return arch;
  }
  return std::nullopt;
}

model_config parse_model_config(std::string_view json_text, std::string_view source) {
  const boost::json::value document = parse_json_text(json_text, source);
  const file_json_rules rules = checkpoint_json_rules(std::string(source));
  const json_field config(document, rules);
  config.object();
  model_config out;
  out.architecture = detect_architecture(config, source);
  read_sizes(config, out);
  read_rope(config, out);
  read_sliding_window(config, out);
  read_token_ids(config, out);
  read_features(config, out);
  return out;
}

model_config load_model_config(const std::filesystem::path& model_dir) {
  constexpr std::uintmax_t max_config_bytes = 4 << 20;
  return parse_model_config(read_text_file(model_dir / "config.json", max_config_bytes, "config.json"), "config.json");
}

}  // namespace troupe
