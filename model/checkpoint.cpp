#include "model/checkpoint.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/stored_code_source.hpp"
#include "model/checkpoint_json.hpp"
#include "model/gguf_stored_codes.hpp"
#include "model/hf_int4.hpp"
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

// A decoder layer's linear weight (not the embeddings or the LM head).
bool is_layer_matrix(std::string_view hf_name) {
  return hf_name.starts_with("model.layers.") && hf_name.ends_with("_proj.weight");
}

// How many of a GGUF file's layer matrices are stored in each type.
std::map<ggml_type, int> gguf_layer_types(const gguf_file& file) {
  std::map<ggml_type, int> types;
  for (const gguf_tensor& tensor : file.tensors()) {
    const std::optional<std::string> name = gguf_hf_tensor_name(tensor.name);
    if (name && is_layer_matrix(*name) && tensor.dims.size() == 2) ++types[tensor.type];
  }
  return types;
}

// The format whose groups most of a GGUF file's layer matrices are (Q4_0:
// int4, Q4_1 and Q4_K: int4_asym, Q5_0 / Q5_1 / Q5_K: int5_asym, IQ4_NL /
// IQ4_XS: int4_nl, Q6_K: int6, Q3_K: int4_g16; gguf_stored_code_format),
// none when they are all of other types. A tie goes to the fewer bits, then
// to the earlier format (a Q4_K_M file's few Q6_K matrices keep their codes
// too, as int6 projections beside the model's int4_asym, and a Q3_K_M
// file's Q4_K and Q5_K ones beside its int4_g16: llama_model's
// projection_format).
weight_quantization gguf_layers_stored_code_format(const gguf_file& file) {
  std::map<weight_quantization, int> formats;
  for (const auto& [type, count] : gguf_layer_types(file)) {
    if (const std::optional<weight_quantization> format = gguf_stored_code_format(type)) formats[*format] += count;
  }
  weight_quantization most = weight_quantization::none;
  int most_count = 0;
  for (const auto& [format, count] : formats) {  // in enum order
    const bool fewer_bits = quantization_code_bits(format) < quantization_code_bits(most);
    if (count > most_count || (count == most_count && fewer_bits)) {
      most = format;
      most_count = count;
    }
  }
  return most;
}

// A 2-D GGUF tensor's shape in HF order, [rows, cols] (GGUF lists dims innermost first).
std::vector<std::int64_t> hf_matrix_shape(const gguf_tensor& tensor) {
  return {static_cast<std::int64_t>(tensor.dims.at(1)), static_cast<std::int64_t>(tensor.dims.at(0))};
}

// True when most of a GGUF file's layer matrices are stored in codes that
// need 5 to 8 bits on a linear grid (Q5_0, Q5_1, Q5_K, Q6_K, Q8_0, IQ4_NL and
// IQ4_XS, whose levels are not evenly spaced, and Q2_K / Q3_K, whose scales
// per 16 weights put a group of 32 on no 4-bit grid). `auto` runs such a
// file as int8 only where no layer matrix keeps its codes (Q8_0, Q2_K);
// kept ones, Q6_K's as int6 and Q3_K's as int4_g16, run in their own
// format (open_for_quantization).
bool gguf_layers_mostly_5_to_8_bits(const gguf_file& file) {
  int finer = 0, all = 0;
  for (const auto& [type, count] : gguf_layer_types(file)) {
    all += count;
    finer += ggml_code_bits(type) >= 5 ? count : 0;
  }
  return 2 * finer > all;
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
  opened.add_hf_int4_weights(options);
  opened.bind_weights();
  return opened;
}

void checkpoint::add_hf_int4_weights(const checkpoint_options& options) {
  constexpr std::uintmax_t max_config_bytes = 4 << 20;
  const std::optional<hf_int4_config> quant =
      parse_hf_int4_config(read_text_file(directory_ / "config.json", max_config_bytes, "config.json"));
  if (!quant) return;
  std::vector<host_tensor> matrices = hf_int4_weights(*quant, config_, files_, tensors_, converted_bytes_);
  if (quant->bits == 8) {
    stored_5_to_8_bits_ = !matrices.empty();
  } else if (options.keep_stored_codes && !matrices.empty()) {
    stored_quantization_ = quant->format();
  }
  for (host_tensor& matrix : matrices) keep_or_expand(std::move(matrix), options.keep_stored_codes);
}

void checkpoint::keep_or_expand(host_tensor tensor, bool keep) {
  const bool expand = !keep && tensor.stored_codes != nullptr;
  converted_.push_back(expand ? expand_int4(tensor, converted_bytes_) : std::move(tensor));
  tensors_.insert_or_assign(converted_.back().name, &converted_.back());
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
    const bool packed = std::any_of(files_.begin(), files_.end(),
                                    [&](const safetensors_file& file) { return file.find_int32(name) != nullptr; });
    if (!tensors_.contains(name) && !packed) {
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
  if (options.keep_stored_codes) stored_quantization_ = gguf_layers_stored_code_format(*gguf_);
  stored_5_to_8_bits_ = gguf_layers_mostly_5_to_8_bits(*gguf_);
  for (const gguf_tensor& tensor : gguf_->tensors()) {
    const std::optional<std::string> name = gguf_hf_tensor_name(tensor.name);
    if (!name) continue;
    std::int64_t rope_heads = 0;
    if (interleaved && name->ends_with("q_proj.weight")) rope_heads = config_.num_attention_heads;
    if (interleaved && name->ends_with("k_proj.weight")) rope_heads = config_.num_key_value_heads;
    try {
      const bool layer_matrix = is_layer_matrix(*name) && tensor.dims.size() == 2;
      // Every matrix in a format troupe keeps stays in its codes, the
      // model's (stored_quantization_) and any other (each projection then
      // runs in its own: llama_model's projection_format).
      if (layer_matrix && stored_quantization_ != weight_quantization::none &&
          gguf_stored_code_format(tensor.type).has_value()) {
        host_tensor kept{*name, dtype::bf16, hf_matrix_shape(tensor), nullptr};
        kept.stored_codes = gguf_stored_code_source(tensor, rope_heads);
        converted_.push_back(std::move(kept));
      } else if (layer_matrix && options.expand_on_demand && ggml_code_bits(tensor.type) > 0) {
        host_tensor streamed{*name, target, hf_matrix_shape(tensor), nullptr};
        streamed.stored_bits = ggml_code_bits(tensor.type);
        streamed.rows = gguf_row_source(tensor, rope_heads);
        converted_.push_back(std::move(streamed));
      } else {
        converted_.push_back(convert_gguf_tensor(tensor, *name, target, rope_heads, converted_bytes_));
      }
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
  const auto bytes = [](const host_tensor& tensor) -> std::uint64_t {
    if (tensor.stored_codes == nullptr) return tensor.byte_size();
    const auto weights = static_cast<std::uint64_t>(tensor.numel());
    const weight_quantization format = tensor.stored_codes->format();
    const std::uint64_t kinds = quantization_group_offsets(format) ? 2 : 1;  // scales, and offsets
    const std::uint64_t codes = weights * static_cast<std::uint64_t>(quantization_code_bits(format)) / 8;
    const std::uint64_t group = quantization_half_group_scales(format) ? half_scale_group : stored_code_group;
    // Block factors (GGUF Q4_K / Q5_K / IQ4_XS, and Q6_K's and Q3_K's
    // groups of 16): a byte a group and an f16 per 256 weights of each kind.
    if (tensor.stored_codes->has_block_factors())
      return codes + kinds * (weights / group + weights / stored_code_factor_block * 2);
    return codes + kinds * weights / stored_code_group * 2;
  };
  std::uint64_t total = bytes(*weights_.embed_tokens) + bytes(*weights_.final_norm);
  if (weights_.lm_head != weights_.embed_tokens) total += bytes(*weights_.lm_head);
  for (const layer_weights& layer : weights_.layers) {
    for (const host_tensor* tensor :
         {layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj, layer.q_bias, layer.k_bias, layer.v_bias,
          layer.o_bias, layer.q_norm, layer.k_norm, layer.gate_proj, layer.up_proj, layer.down_proj, layer.input_norm,
          layer.post_attention_norm}) {
      if (tensor != nullptr) total += bytes(*tensor);
    }
  }
  return total;
}

quantized_checkpoint open_for_quantization(const std::filesystem::path& path, std::string_view quantization,
                                           bool quantized_kernels, checkpoint_options options) {
  const bool automatic = quantization == "auto";
  weight_quantization requested = weight_quantization::none;
  if (!automatic) {
    const std::optional<weight_quantization> parsed = parse_quantization(quantization);
    if (!parsed)
      throw std::runtime_error("quantization '" + std::string(quantization) + "' is not one of " +
                               quantization_choices_text());
    requested = *parsed;
  }
  const int requested_bits = quantization_code_bits(requested);
  options.keep_stored_codes = quantized_kernels && (automatic || (requested_bits > 0 && requested_bits < 8));
  options.expand_on_demand = quantized_kernels && (automatic || requested != weight_quantization::none);
  quantized_checkpoint out{checkpoint::open(path, options), requested};
  const weight_quantization stored = out.weights.stored_quantization();
  // Q8_0, Q2_K and 8-bit GPTQ have no exact home; per-row int8 decodes
  // twice as fast as bf16 at about the same logits (docs/operations.md), so
  // they run as int8. (A file of kept codes, Q6_K's as int6 and Q3_K's as
  // int4_g16 included, runs in their format, below: a Q2_K file's Q3_K
  // matrices make it int4_g16, its Q2_K ones int8 beside them.)
  if (automatic && quantized_kernels && out.weights.stored_5_to_8_bits()) out.quantization = weight_quantization::int8;
  if (stored == weight_quantization::none) return out;
  if (automatic) {
    out.quantization = stored;
  } else if (stored != requested) {
    options.keep_stored_codes = false;  // stored in the other int4 format: expand, then quantise to the one asked for
    out.weights = checkpoint::open(path, options);
  }
  return out;
}

}  // namespace troupe
