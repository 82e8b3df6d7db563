#include "model/gguf_model.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "base/parallel_blocks.hpp"
#include "model/gguf_dequantize.hpp"
#include "model/gguf_rope.hpp"

namespace troupe {

namespace {

// Typed reads of metadata keys; errors name the file and key.
class metadata_reader {
 public:
  explicit metadata_reader(const gguf_file& file) : file_(file) {}

  std::optional<std::int64_t> integer(std::string_view key) const {
    const gguf_value* value = file_.find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_integer())
      file_.fail_key(key, "must be an integer, got " + std::string(gguf_type_name(value->type)));
    if (value->type == gguf_type::uint64 && value->unsigned_value > static_cast<std::uint64_t>(INT64_MAX))
      file_.fail_key(key, "is too large");
    const bool is_signed = value->type == gguf_type::int8 || value->type == gguf_type::int16 ||
                           value->type == gguf_type::int32 || value->type == gguf_type::int64;
    return is_signed ? value->signed_value : static_cast<std::int64_t>(value->unsigned_value);
  }
  std::int64_t required_integer(std::string_view key) const {
    const auto value = integer(key);
    if (!value) file_.fail_key(key, "is missing");
    return *value;
  }
  std::optional<double> number(std::string_view key) const {
    const gguf_value* value = file_.find(key);
    if (value == nullptr) return std::nullopt;
    if (value->type == gguf_type::float32 || value->type == gguf_type::float64) return value->float_value;
    return static_cast<double>(*integer(key));
  }
  std::optional<std::string_view> text(std::string_view key) const {
    const gguf_value* value = file_.find(key);
    if (value == nullptr) return std::nullopt;
    if (value->type != gguf_type::string)
      file_.fail_key(key, "must be a string, got " + std::string(gguf_type_name(value->type)));
    return value->text;
  }

 private:
  const gguf_file& file_;
};

model_architecture architecture_of(const gguf_file& file, const metadata_reader& meta) {
  const auto name = meta.text("general.architecture");
  if (!name) file.fail_key("general.architecture", "is missing");
  if (*name == "llama") return model_architecture::llama;
  if (*name == "qwen2") return model_architecture::qwen2;
  if (*name == "qwen3") return model_architecture::qwen3;
  file.fail_key("general.architecture",
                "'" + std::string(*name) + "' is not supported (supported: llama, qwen2, qwen3)");
}

const gguf_tensor& required_tensor(const gguf_file& file, std::string_view name) {
  const gguf_tensor* tensor = file.find_tensor(name);
  if (tensor == nullptr) throw std::runtime_error(file.display_name() + ": missing tensor '" + std::string(name) + "'");
  return *tensor;
}

// rope_theta and rope_scaling as config.json would state them.
void add_rope(const gguf_file& file, const metadata_reader& meta, const std::string& arch,
              boost::json::object& config) {
  config["rope_theta"] = meta.number(arch + ".rope.freq_base").value_or(10000.0);
  const std::string type_key = arch + ".rope.scaling.type";
  const std::string type(meta.text(type_key).value_or("none"));
  std::optional<double> factor = meta.number(arch + ".rope.scaling.factor");
  if (!factor) factor = meta.number(arch + ".rope.scale_linear");
  if (type == "linear" || (type == "none" && factor && *factor != 1.0 && !file.find(type_key))) {
    config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", factor.value_or(1.0)}};
  } else if (type != "none") {
    file.fail_key(type_key, "'" + type + "' is not supported (supported: none, linear)");
  }
  if (const gguf_tensor* factors = file.find_tensor("rope_freqs.weight")) {
    const double theta = config["rope_theta"].to_number<double>();
    const std::int64_t head_dim = config["head_dim"].to_number<std::int64_t>();
    if (const auto llama3 = llama3_rope_from_factors(file, *factors, theta, head_dim)) {
      config["rope_scaling"] = {{"rope_type", "llama3"},
                                {"factor", llama3->factor},
                                {"low_freq_factor", llama3->low_freq_factor},
                                {"high_freq_factor", llama3->high_freq_factor},
                                {"original_max_position_embeddings", llama3->original_max_position}};
    }
  }
}

std::string config_source(const gguf_file& file) { return file.display_name() + " (config from metadata)"; }

}  // namespace

model_config gguf_model_config(const gguf_file& file) {
  const metadata_reader meta(file);
  if (const auto splits = meta.integer("split.count"); splits && *splits > 1)
    file.fail_key("split.count", std::to_string(*splits) +
                                     ": split GGUF files are not supported (merge them with llama-gguf-split --merge)");
  const model_architecture architecture = architecture_of(file, meta);
  const std::string arch(architecture_model_type(architecture));
  boost::json::object config;
  config["model_type"] = arch;
  config["architectures"] = boost::json::array{std::string(architecture_class_name(architecture))};
  config["hidden_size"] = meta.required_integer(arch + ".embedding_length");
  config["intermediate_size"] = meta.required_integer(arch + ".feed_forward_length");
  config["num_hidden_layers"] = meta.required_integer(arch + ".block_count");
  const std::int64_t heads = meta.required_integer(arch + ".attention.head_count");
  config["num_attention_heads"] = heads;
  config["num_key_value_heads"] = meta.integer(arch + ".attention.head_count_kv").value_or(heads);
  const std::int64_t hidden = config["hidden_size"].as_int64();
  config["head_dim"] = meta.integer(arch + ".attention.key_length").value_or(heads > 0 ? hidden / heads : 0);
  if (const auto rotated = meta.integer(arch + ".rope.dimension_count");
      rotated && *rotated != config["head_dim"].as_int64())
    file.fail_key(arch + ".rope.dimension_count", std::to_string(*rotated) + " is not the head size " +
                                                      std::to_string(config["head_dim"].as_int64()) +
                                                      " (partial rotary embeddings are not supported)");
  if (const auto experts = meta.integer(arch + ".expert_count"); experts && *experts > 0)
    file.fail_key(arch + ".expert_count", "mixture-of-experts models are not supported");
  config["max_position_embeddings"] = meta.integer(arch + ".context_length").value_or(2048);
  config["rms_norm_eps"] = meta.number(arch + ".attention.layer_norm_rms_epsilon").value_or(1e-6);
  const gguf_tensor& embeddings = required_tensor(file, "token_embd.weight");
  if (embeddings.dims.size() != 2)
    throw std::runtime_error(file.display_name() + ": tensor 'token_embd.weight' must have 2 dimensions");
  config["vocab_size"] = embeddings.dims[1];
  config["tie_word_embeddings"] = file.find_tensor("output.weight") == nullptr;
  if (architecture == model_architecture::llama)
    config["attention_bias"] = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  add_rope(file, meta, arch, config);
  if (const auto bos = meta.integer("tokenizer.ggml.bos_token_id")) config["bos_token_id"] = *bos;
  if (const auto eos = meta.integer("tokenizer.ggml.eos_token_id")) config["eos_token_id"] = *eos;
  if (const auto pad = meta.integer("tokenizer.ggml.padding_token_id")) config["pad_token_id"] = *pad;
  config["dtype"] = std::string(dtype_name(gguf_weight_dtype(file)));
  return parse_model_config(boost::json::serialize(config), config_source(file));
}

generation_config gguf_generation_config(const gguf_file& file) {
  const metadata_reader meta(file);
  generation_config out;
  out.bos_token_id = meta.integer("tokenizer.ggml.bos_token_id");
  out.pad_token_id = meta.integer("tokenizer.ggml.padding_token_id");
  for (const char* key :
       {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const auto id = meta.integer(key);
    if (!id) continue;
    if (*id < 0) file.fail_key(key, "(" + std::to_string(*id) + ") must not be negative");
    if (std::find(out.eos_token_ids.begin(), out.eos_token_ids.end(), *id) == out.eos_token_ids.end())
      out.eos_token_ids.push_back(*id);
  }
  return out;
}

std::optional<std::string> gguf_hf_tensor_name(std::string_view name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  if (!name.starts_with("blk.")) return std::nullopt;
  const std::string_view rest = name.substr(4);
  const std::size_t dot = rest.find('.');
  int layer = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + std::min(dot, rest.size()), layer);
  if (dot == std::string_view::npos || error != std::errc() || end != rest.data() + dot) return std::nullopt;
  static constexpr std::pair<std::string_view, std::string_view> parts[] = {
      {"attn_norm", "input_layernorm"},    {"ffn_norm", "post_attention_layernorm"},
      {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  const std::string_view tail = rest.substr(dot + 1);
  for (const auto& [gguf_part, hf_part] : parts) {
    for (std::string_view suffix : {".weight", ".bias"}) {
      if (tail.size() == gguf_part.size() + suffix.size() && tail.starts_with(gguf_part) && tail.ends_with(suffix))
        return "model.layers." + std::to_string(layer) + "." + std::string(hf_part) + std::string(suffix);
    }
  }
  return std::nullopt;
}

dtype gguf_weight_dtype(const gguf_file& file) {
  bool all_f32 = true;
  bool matrices_f16 = true;
  for (const gguf_tensor& tensor : file.tensors()) {
    if (!gguf_hf_tensor_name(tensor.name)) continue;
    all_f32 = all_f32 && tensor.type == ggml_type::f32;
    if (tensor.dims.size() >= 2) matrices_f16 = matrices_f16 && tensor.type == ggml_type::f16;
  }
  if (all_f32) return dtype::f32;
  return matrices_f16 ? dtype::f16 : dtype::bf16;
}

gguf_rows::gguf_rows(const gguf_tensor& tensor, std::int64_t rope_heads)
    : row_length(tensor.dims.empty() ? 1 : tensor.dims[0]),
      count(row_length == 0 ? 0 : tensor.elements() / row_length),
      row_bytes(row_length / ggml_block_elements(tensor.type) * ggml_block_bytes(tensor.type)),
      data_(tensor.data) {
  if (rope_heads > 0 && (count % static_cast<std::uint64_t>(rope_heads) != 0 || (count / rope_heads) % 2 != 0)) {
    throw std::runtime_error("tensor '" + tensor.name + "': " + std::to_string(count) + " rows do not split into " +
                             std::to_string(rope_heads) + " heads of an even size");
  }
  head_rows_ = rope_heads > 0 ? count / static_cast<std::uint64_t>(rope_heads) : 0;
}

const std::byte* gguf_rows::row(std::uint64_t hf_row) const {
  // llama.cpp stores row h*D + 2i + s where HF has h*D + s*D/2 + i.
  std::uint64_t source = hf_row;
  if (head_rows_ > 0) {
    const std::uint64_t head = hf_row / head_rows_, within = hf_row % head_rows_, half = head_rows_ / 2;
    source = head * head_rows_ + 2 * (within % half) + within / half;
  }
  return data_ + source * row_bytes;
}

namespace {

class gguf_expanding_source final : public row_source {
 public:
  gguf_expanding_source(const gguf_tensor& tensor, std::int64_t rope_heads)
      : rows_(tensor, rope_heads), type_(tensor.type) {}

  void read_rows(std::int64_t first, std::int64_t count, float* out) const override {
    for (std::int64_t i = 0; i < count; ++i)
      gguf_dequantize(type_, rows_.row(static_cast<std::uint64_t>(first + i)), out + i * rows_.row_length,
                      rows_.row_length);
  }

 private:
  gguf_rows rows_;
  ggml_type type_;
};

}  // namespace

std::shared_ptr<const row_source> gguf_row_source(const gguf_tensor& tensor, std::int64_t rope_heads) {
  if (tensor.dims.size() != 2)
    throw std::runtime_error("tensor '" + tensor.name + "': " + std::to_string(tensor.dims.size()) +
                             " dimensions, not a matrix");
  return std::make_shared<gguf_expanding_source>(tensor, rope_heads);
}

host_tensor convert_gguf_tensor(const gguf_tensor& tensor, std::string hf_name, dtype target, std::int64_t rope_heads,
                                gguf_buffers& storage) {
  host_tensor out;
  out.name = std::move(hf_name);
  out.type = target;
  out.stored_bits = ggml_code_bits(tensor.type);
  for (auto dim = tensor.dims.rbegin(); dim != tensor.dims.rend(); ++dim)
    out.shape.push_back(static_cast<std::int64_t>(*dim));
  const bool same_type = (target == dtype::f32 && tensor.type == ggml_type::f32) ||
                         (target == dtype::f16 && tensor.type == ggml_type::f16) ||
                         (target == dtype::bf16 && tensor.type == ggml_type::bf16);
  const bool aligned = reinterpret_cast<std::uintptr_t>(tensor.data) % dtype_size(target) == 0;
  if (same_type && aligned && rope_heads == 0) {
    out.data = tensor.data;
    return out;
  }
  // An empty tensor may still name a huge row length: nothing to convert, nothing to allocate.
  if (tensor.elements() == 0) {
    out.data = tensor.data;
    return out;
  }
  const gguf_rows rows(tensor, rope_heads);
  // Every element is written below: no zero-fill pass over the (embedding-sized) buffer first.
  auto buffer = std::make_unique_for_overwrite<std::byte[]>(tensor.elements() * dtype_size(target));
  const std::uint64_t row_length = rows.row_length;
  constexpr std::int64_t block_rows = 64;
  parallel_blocks(static_cast<std::int64_t>(rows.count), block_rows, [&](std::int64_t first, std::int64_t end) {
    std::vector<float> scratch(row_length);
    for (auto row = static_cast<std::uint64_t>(first); row < static_cast<std::uint64_t>(end); ++row) {
      gguf_dequantize(tensor.type, rows.row(row), scratch.data(), row_length);
      convert_elements(scratch.data(), dtype::f32, buffer.get() + row * row_length * dtype_size(target), target,
                       row_length);
    }
  });
  out.data = buffer.get();
  storage.push_back(std::move(buffer));
  return out;
}

}  // namespace troupe
