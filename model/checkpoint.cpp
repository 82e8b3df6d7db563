#include "model/checkpoint.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/checkpoint_json.hpp"
#include "model/terminal_progress.hpp"

namespace troupe {

namespace {

constexpr std::string_view single_file_name = "model.safetensors";
constexpr std::string_view index_file_name = "model.safetensors.index.json";
constexpr std::uintmax_t max_index_bytes = 64 << 20;

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void check_shard_name(const std::string& name, std::string_view source) {
  const bool escapes = name.empty() || name.front() == '/' || name.find("..") != std::string::npos ||
                       name.find('\0') != std::string::npos;
  if (escapes) {
    throw std::runtime_error(std::string(source) + ": shard name '" + name + "' escapes the model directory");
  }
}

// Looks tensors up by HF name and checks their shapes against the config.
class weight_binder {
 public:
  weight_binder(const std::filesystem::path& directory,
                const std::map<std::string, const host_tensor*, std::less<>>& tensors, std::string shape_source)
      : prefix_(directory.string() + ": "), tensors_(tensors), shape_source_(std::move(shape_source)) {}

  const host_tensor* bind(const std::string& name, std::vector<std::int64_t> expected) const {
    auto found = tensors_.find(name);
    if (found == tensors_.end()) throw std::runtime_error(prefix_ + "missing tensor '" + name + "'");
    const host_tensor* tensor = found->second;
    if (tensor->shape != expected) {
      throw std::runtime_error(prefix_ + "tensor '" + name + "' has shape " + shape_text(tensor->shape) +
                               ", expected " + shape_text(expected) + " from " + shape_source_);
    }
    return tensor;
  }

 private:
  std::string prefix_;
  const std::map<std::string, const host_tensor*, std::less<>>& tensors_;
  std::string shape_source_;
};

layer_weights bind_layer(const weight_binder& binder, const model_config& config, std::int64_t index) {
  const std::string p = "model.layers." + std::to_string(index) + ".";
  const std::int64_t h = config.hidden_size, q = config.q_size(), kv = config.kv_size();
  const std::int64_t ffn = config.intermediate_size;
  layer_weights layer;
  layer.q_proj = binder.bind(p + "self_attn.q_proj.weight", {q, h});
  layer.k_proj = binder.bind(p + "self_attn.k_proj.weight", {kv, h});
  layer.v_proj = binder.bind(p + "self_attn.v_proj.weight", {kv, h});
  layer.o_proj = binder.bind(p + "self_attn.o_proj.weight", {h, q});
  if (config.qkv_bias) {
    layer.q_bias = binder.bind(p + "self_attn.q_proj.bias", {q});
    layer.k_bias = binder.bind(p + "self_attn.k_proj.bias", {kv});
    layer.v_bias = binder.bind(p + "self_attn.v_proj.bias", {kv});
  }
  if (config.o_bias) layer.o_bias = binder.bind(p + "self_attn.o_proj.bias", {h});
  if (config.qk_norm) {
    layer.q_norm = binder.bind(p + "self_attn.q_norm.weight", {config.head_dim});
    layer.k_norm = binder.bind(p + "self_attn.k_norm.weight", {config.head_dim});
  }
  layer.gate_proj = binder.bind(p + "mlp.gate_proj.weight", {ffn, h});
  layer.up_proj = binder.bind(p + "mlp.up_proj.weight", {ffn, h});
  layer.down_proj = binder.bind(p + "mlp.down_proj.weight", {h, ffn});
  layer.input_norm = binder.bind(p + "input_layernorm.weight", {h});
  layer.post_attention_norm = binder.bind(p + "post_attention_layernorm.weight", {h});
  return layer;
}

}  // namespace

shard_index parse_shard_index(std::string_view index_json, std::string_view source) {
  const boost::json::value document = parse_json_text(index_json, source);
  const file_json_rules rules = checkpoint_json_rules(std::string(source));
  const json_field index(document, rules);
  index.object();
  const std::optional<json_field> map = index.get_object("weight_map");
  if (!map) index.fail("weight_map", "is missing");
  shard_index out;
  for (const auto& [key, value] : map->object()) {
    const std::string tensor(key);
    if (!value.is_string()) map->fail(tensor, "must be a shard file name, got " + std::string(json_type_name(value)));
    const std::string shard(value.get_string());
    check_shard_name(shard, source);
    if (std::find(out.shard_files.begin(), out.shard_files.end(), shard) == out.shard_files.end()) {
      out.shard_files.push_back(shard);
    }
    out.weight_map.emplace(tensor, shard);
  }
  if (out.weight_map.empty()) index.fail("weight_map", "is empty");
  return out;
}

checkpoint checkpoint::open(const std::filesystem::path& directory, const checkpoint_options& options) {
  if (is_gguf_path(directory)) {
    checkpoint opened;
    opened.open_gguf(directory, options);
    return opened;
  }
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) {
    throw std::runtime_error(directory.string() + ": model directory does not exist or is not a directory");
  }
  checkpoint opened;
  opened.directory_ = directory;
  opened.config_ = load_model_config(directory);
  opened.generation_ = load_generation_config(directory);
  opened.open_files(options);
  opened.bind_weights();
  return opened;
}

void checkpoint::open_files(const checkpoint_options& options) {
  std::vector<std::string> names;
  std::optional<shard_index> index;
  std::error_code error;
  if (std::filesystem::exists(directory_ / single_file_name, error)) {
    names.emplace_back(single_file_name);
  } else if (std::filesystem::exists(directory_ / index_file_name, error)) {
    index = parse_shard_index(read_text_file(directory_ / index_file_name, max_index_bytes, index_file_name));
    names = index->shard_files;
  } else {
    throw std::runtime_error(directory_.string() + ": no " + std::string(single_file_name) + " or " +
                             std::string(index_file_name));
  }
  std::uint64_t total = 0;
  for (const std::string& name : names) {
    const std::uintmax_t size = std::filesystem::file_size(directory_ / name, error);
    if (!error) total += size;  // a missing shard fails with a clear error when it is opened below
  }
  terminal_progress progress("loading " + directory_.filename().string(), total,
                             options.show_progress && terminal_progress::stderr_is_terminal());
  std::uint64_t done = 0;
  files_.reserve(names.size());
  for (const std::string& name : names) {
    files_.emplace_back(directory_ / name);
    if (options.prefetch) files_.back().prefetch();
    done += files_.back().file_size();
    progress.update(done);
  }
  for (std::size_t shard = 0; shard < files_.size(); ++shard) {
    for (const host_tensor& tensor : files_[shard].tensors()) {
      // With an index, a tensor belongs to the shard the index names.
      if (index) {
        auto mapped = index->weight_map.find(tensor.name);
        if (mapped == index->weight_map.end() || mapped->second != names[shard]) continue;
      }
      tensors_.emplace(tensor.name, &tensor);
    }
  }
  if (!index) return;
  for (const auto& [name, shard] : index->weight_map) {
    if (!tensors_.contains(name)) {
      throw std::runtime_error(std::string(index_file_name) + ": tensor '" + name + "' is mapped to '" + shard +
                               "', which does not contain it");
    }
  }
}

void checkpoint::open_gguf(const std::filesystem::path& path, const checkpoint_options& options) {
  directory_ = path;
  gguf_ = std::make_unique<gguf_file>(path);
  config_ = gguf_model_config(*gguf_);
  generation_ = gguf_generation_config(*gguf_);
  const dtype target = gguf_weight_dtype(*gguf_);
  terminal_progress progress("loading " + path.filename().string(), gguf_->tensors().size(),
                             options.show_progress && terminal_progress::stderr_is_terminal());
  // llama.cpp's converter interleaves the RoPE halves of Llama's q and k rows.
  const bool interleaved = config_.architecture == model_architecture::llama;
  for (const gguf_tensor& tensor : gguf_->tensors()) {
    const std::optional<std::string> name = gguf_hf_tensor_name(tensor.name);
    if (!name) continue;
    std::int64_t rope_heads = 0;
    if (interleaved && name->ends_with("q_proj.weight")) rope_heads = config_.num_attention_heads;
    if (interleaved && name->ends_with("k_proj.weight")) rope_heads = config_.num_key_value_heads;
    try {
      converted_.push_back(convert_gguf_tensor(tensor, *name, target, rope_heads, converted_bytes_));
    } catch (const std::runtime_error& error) {
      throw std::runtime_error(gguf_->display_name() + ": " + error.what());
    }
    tensors_.emplace(converted_.back().name, &converted_.back());
    progress.update(converted_.size());
  }
  bind_weights();
}

void checkpoint::bind_weights() {
  const weight_binder binder(directory_, tensors_, gguf_ ? "the GGUF metadata" : "config.json");
  const std::int64_t h = config_.hidden_size, vocab = config_.vocab_size;
  weights_.embed_tokens = binder.bind("model.embed_tokens.weight", {vocab, h});
  weights_.final_norm = binder.bind("model.norm.weight", {h});
  weights_.lm_head = config_.tie_word_embeddings ? weights_.embed_tokens : binder.bind("lm_head.weight", {vocab, h});
  weights_.layers.reserve(static_cast<std::size_t>(config_.num_hidden_layers));
  for (std::int64_t i = 0; i < config_.num_hidden_layers; ++i)
    weights_.layers.push_back(bind_layer(binder, config_, i));
}

const host_tensor* checkpoint::find_tensor(std::string_view name) const {
  auto found = tensors_.find(name);
  return found == tensors_.end() ? nullptr : found->second;
}

std::uint64_t checkpoint::weight_bytes() const {
  std::uint64_t total = weights_.embed_tokens->byte_size() + weights_.final_norm->byte_size();
  if (weights_.lm_head != weights_.embed_tokens) total += weights_.lm_head->byte_size();
  for (const layer_weights& layer : weights_.layers) {
    for (const host_tensor* tensor :
         {layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj, layer.q_bias, layer.k_bias, layer.v_bias,
          layer.o_bias, layer.q_norm, layer.k_norm, layer.gate_proj, layer.up_proj, layer.down_proj, layer.input_norm,
          layer.post_attention_norm}) {
      if (tensor != nullptr) total += tensor->byte_size();
    }
  }
  return total;
}

}  // namespace troupe
