#include "model/make_model.hpp"

#include <unistd.h>

#include <atomic>
#include <boost/json/value.hpp>
#include <boost/json/value_from.hpp>
#include <fstream>
#include <stdexcept>

#include "model/builtin_tokenizer.hpp"
#include "model/checkpoint_json.hpp"
#include "model/python_json.hpp"
#include "model/random_weights.hpp"
#include "model/terminal_progress.hpp"

namespace troupe {

namespace {

// Shapes of a preset before the architecture and tokenizer are applied.
struct preset_shape {
  std::int64_t hidden, intermediate, layers, heads, kv_heads, head_dim;
  std::int64_t vocab;  ///< 0: the tokenizer's size rounded up to a multiple of 64
  std::int64_t max_position;
  double llama3_factor;  ///< llama rope scaling factor
  std::int64_t original_max_position;
  bool tied;  ///< for 1b/8b; tiny/small tie per architecture
};

preset_shape shape_of(model_preset preset) {
  switch (preset) {
    case model_preset::tiny:
      return {128, 384, 4, 4, 2, 32, 0, 8192, 8.0, 1024, true};
    case model_preset::small:
      return {512, 1536, 8, 8, 4, 64, 0, 8192, 8.0, 1024, true};
    case model_preset::one_b:
      return {2048, 8192, 16, 32, 8, 64, 128256, 131072, 32.0, 8192, true};
    case model_preset::eight_b:
      return {4096, 14336, 32, 32, 8, 128, 128256, 131072, 8.0, 8192, false};
  }
  throw std::logic_error("unknown preset");
}

bool is_llama_shaped(model_preset preset) { return preset == model_preset::one_b || preset == model_preset::eight_b; }

std::string_view dtype_torch_name(dtype type) {
  switch (type) {
    case dtype::f32:
      return "float32";
    case dtype::f16:
      return "float16";
    case dtype::bf16:
      return "bfloat16";
  }
  return "?";
}

// The tokenizer the checkpoint ships and the ids the configs refer to.
struct tokenizer_choice {
  std::optional<builtin_tokenizer> builtin;
  std::int64_t size = 0;
  std::optional<std::int64_t> bos_id;
  std::vector<std::int64_t> eos_ids;
};

// Id of the special token named by tokenizer_config.json's `key` (a string
// or an {"content": ...} object), looked up in tokenizer.json.
std::optional<std::int64_t> special_token_id(const json_field& config, std::string_view key,
                                             const boost::json::value& tokenizer) {
  const std::optional<json_field> field = config.find(key);
  if (!field) return std::nullopt;
  const boost::json::value* entry = &field->value();
  std::string content;
  if (entry->is_string()) {
    content = entry->get_string();
  } else if (const auto* object = entry->if_object();
             object && object->contains("content") && object->at("content").is_string()) {
    content = object->at("content").get_string();
  } else {
    config.fail(key, "must be a string or an object with 'content'");
  }
  if (const auto* added = tokenizer.at("added_tokens").if_array()) {
    for (const boost::json::value& token : *added) {
      if (token.at("content").as_string() == content) return token.at("id").to_number<std::int64_t>();
    }
  }
  const boost::json::value& vocab = tokenizer.at("model").at("vocab");
  if (const auto* map = vocab.if_object(); map && map->contains(content))
    return map->at(content).to_number<std::int64_t>();
  throw std::runtime_error("tokenizer_config.json: " + std::string(key) + " '" + content +
                           "' is not in tokenizer.json");
}

// Largest token id + 1 over the model vocabulary and the added tokens.
std::int64_t tokenizer_size(const boost::json::value& tokenizer) {
  std::int64_t size = 0;
  const boost::json::value& vocab = tokenizer.at("model").at("vocab");
  if (const auto* map = vocab.if_object()) {
    for (const auto& [token, id] : *map) size = std::max(size, id.to_number<std::int64_t>() + 1);
  } else {
    size = static_cast<std::int64_t>(vocab.as_array().size());  // Unigram: a list of [piece, score]
  }
  if (const auto* added = tokenizer.at("added_tokens").if_array()) {
    for (const boost::json::value& token : *added) size = std::max(size, token.at("id").to_number<std::int64_t>() + 1);
  }
  return size;
}

tokenizer_choice choose_tokenizer(const make_model_options& options, std::int64_t max_position) {
  tokenizer_choice choice;
  if (!options.tokenizer_dir) {
    choice.builtin = make_builtin_tokenizer(max_position);
    choice.size = choice.builtin->size;
    choice.bos_id = choice.builtin->begin_of_text_id;
    choice.eos_ids = {choice.builtin->end_of_text_id, choice.builtin->eot_id};
    return choice;
  }
  const std::filesystem::path& dir = *options.tokenizer_dir;
  constexpr std::uintmax_t max_tokenizer_bytes = 256u << 20;
  const boost::json::value tokenizer = read_json_file(dir / "tokenizer.json", max_tokenizer_bytes, "tokenizer.json");
  try {
    choice.size = tokenizer_size(tokenizer);
    if (std::filesystem::exists(dir / "tokenizer_config.json")) {
      const boost::json::value config_value =
          read_json_file(dir / "tokenizer_config.json", max_tokenizer_bytes, "tokenizer_config.json");
      const file_json_rules rules = checkpoint_json_rules("tokenizer_config.json");
      const json_field config(config_value, rules);
      config.object();
      choice.bos_id = special_token_id(config, "bos_token", tokenizer);
      if (auto eos = special_token_id(config, "eos_token", tokenizer)) choice.eos_ids = {*eos};
    }
  } catch (const std::logic_error& error) {  // Boost.JSON accessors: a missing or mistyped field
    throw std::runtime_error("tokenizer.json: unexpected structure: " + std::string(error.what()));
  } catch (const boost::system::system_error& error) {  // Boost.JSON number conversion
    throw std::runtime_error("tokenizer.json: unexpected structure: " + std::string(error.what()));
  }
  return choice;
}

boost::json::value rope_parameters(const make_model_options& options, const preset_shape& shape) {
  if (options.architecture != model_architecture::llama) return {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  return {{"factor", shape.llama3_factor}, {"high_freq_factor", 4.0},
          {"low_freq_factor", 1.0},        {"original_max_position_embeddings", shape.original_max_position},
          {"rope_theta", 500000.0},        {"rope_type", "llama3"}};
}

bool ties_embeddings(const make_model_options& options) {
  if (is_llama_shaped(options.preset)) return shape_of(options.preset).tied;
  return options.architecture != model_architecture::mistral;
}

std::int64_t vocab_size_for(const preset_shape& shape, std::int64_t tokenizer_size) {
  if (shape.vocab == 0) return (tokenizer_size + 63) / 64 * 64;
  if (tokenizer_size > shape.vocab) {
    throw std::runtime_error("the tokenizer has " + std::to_string(tokenizer_size) +
                             " tokens, more than the preset's vocabulary of " + std::to_string(shape.vocab));
  }
  return shape.vocab;
}

void add_architecture_fields(boost::json::object& config, const make_model_options& options,
                             const preset_shape& shape) {
  const model_architecture arch = options.architecture;
  if (arch == model_architecture::llama || arch == model_architecture::qwen3) config["attention_bias"] = false;
  if (arch != model_architecture::qwen2) config["head_dim"] = shape.head_dim;  // Qwen2 derives it from hidden / heads
  if (arch == model_architecture::llama) {
    config["mlp_bias"] = false;
    config["pretraining_tp"] = 1;
  }
  if (arch == model_architecture::mistral) config["sliding_window"] = nullptr;
  if (arch == model_architecture::qwen2 || arch == model_architecture::qwen3) {
    boost::json::array layer_types;
    for (std::int64_t i = 0; i < shape.layers; ++i) layer_types.push_back("full_attention");
    config["layer_types"] = std::move(layer_types);
    config["max_window_layers"] = shape.layers;
    config["sliding_window"] = nullptr;
    config["use_sliding_window"] = false;
  }
}

void write_text(const std::filesystem::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out.flush()) throw std::runtime_error(path.string() + ": cannot write");
}

std::string generation_config_json(const make_model_options& options, const tokenizer_choice& tokenizer) {
  boost::json::object config;
  if (tokenizer.bos_id) config["bos_token_id"] = *tokenizer.bos_id;
  if (tokenizer.eos_ids.size() == 1) config["eos_token_id"] = tokenizer.eos_ids.front();
  if (tokenizer.eos_ids.size() > 1) config["eos_token_id"] = boost::json::value_from(tokenizer.eos_ids);
  if (is_llama_shaped(options.preset)) {  // Llama 3's published sampling defaults
    config["do_sample"] = true;
    config["temperature"] = 0.6;
    config["top_p"] = 0.9;
  }
  return to_python_json(config) + "\n";
}

void write_tokenizer_files(const make_model_options& options, const tokenizer_choice& tokenizer,
                           const std::filesystem::path& directory) {
  if (tokenizer.builtin) {
    write_text(directory / "tokenizer.json", tokenizer.builtin->tokenizer_json);
    write_text(directory / "tokenizer_config.json", tokenizer.builtin->tokenizer_config_json);
    return;
  }
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    const std::filesystem::path source = *options.tokenizer_dir / name;
    if (std::filesystem::exists(source)) std::filesystem::copy_file(source, directory / name);
  }
}

}  // namespace

std::optional<model_preset> parse_model_preset(std::string_view name) {
  if (name == "tiny") return model_preset::tiny;
  if (name == "small") return model_preset::small;
  if (name == "1b") return model_preset::one_b;
  if (name == "8b") return model_preset::eight_b;
  return std::nullopt;
}

std::string make_config_json(const make_model_options& options, std::int64_t tokenizer_size,
                             std::optional<std::int64_t> bos_id, const std::vector<std::int64_t>& eos_ids) {
  const preset_shape shape = shape_of(options.preset);
  const model_architecture arch = options.architecture;
  boost::json::object config;
  config["architectures"] = boost::json::array{architecture_class_name(arch)};
  config["attention_dropout"] = 0.0;
  config["bos_token_id"] = bos_id ? boost::json::value(*bos_id) : boost::json::value(nullptr);
  config["dtype"] = dtype_torch_name(options.type);
  if (eos_ids.empty()) config["eos_token_id"] = nullptr;
  if (eos_ids.size() == 1) config["eos_token_id"] = eos_ids.front();
  if (eos_ids.size() > 1) config["eos_token_id"] = boost::json::value_from(eos_ids);
  config["hidden_act"] = "silu";
  config["hidden_size"] = shape.hidden;
  config["initializer_range"] = 0.02;
  config["intermediate_size"] = shape.intermediate;
  config["max_position_embeddings"] = shape.max_position;
  config["model_type"] = architecture_model_type(arch);
  config["num_attention_heads"] = shape.heads;
  config["num_hidden_layers"] = shape.layers;
  config["num_key_value_heads"] = shape.kv_heads;
  config["pad_token_id"] = nullptr;
  const bool qwen = arch == model_architecture::qwen2 || arch == model_architecture::qwen3;
  config["rms_norm_eps"] = qwen ? 1e-6 : 1e-5;
  config["rope_parameters"] = rope_parameters(options, shape);
  config["tie_word_embeddings"] = ties_embeddings(options);
  config["use_cache"] = true;
  config["vocab_size"] = vocab_size_for(shape, tokenizer_size);
  add_architecture_fields(config, options, shape);
  return to_python_json(config) + "\n";
}

void write_model_files(const make_model_options& options, const std::filesystem::path& directory) {
  const tokenizer_choice tokenizer = choose_tokenizer(options, shape_of(options.preset).max_position);
  const std::string config_text = make_config_json(options, tokenizer.size, tokenizer.bos_id, tokenizer.eos_ids);
  const model_config config = parse_model_config(config_text);  // the loader's view, so both agree on shapes
  write_text(directory / "config.json", config_text);
  write_text(directory / "generation_config.json", generation_config_json(options, tokenizer));
  write_tokenizer_files(options, tokenizer, directory);

  const std::vector<random_tensor> tensors = random_checkpoint_tensors(config, options.type);
  std::uint64_t total = 0;
  for (const random_tensor& tensor : tensors) total += tensor.entry.byte_size();
  terminal_progress progress("writing " + options.output_dir.filename().string(), total,
                             options.show_progress && terminal_progress::stderr_is_terminal());
  write_random_weights(directory, tensors, options.seed, options.max_shard_bytes,
                       [&](std::uint64_t written) { progress.update(written); });
}

std::filesystem::path staging_path_for(const std::filesystem::path& target) {
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path absolute = std::filesystem::absolute(target).lexically_normal();
  const std::string name =
      absolute.has_filename() ? absolute.filename().string() : absolute.parent_path().filename().string();
  const std::filesystem::path parent =
      absolute.has_filename() ? absolute.parent_path() : absolute.parent_path().parent_path();
  return parent / ("." + name + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

bool publish_directory(const std::filesystem::path& staging, const std::filesystem::path& target) {
  std::error_code error;
  std::filesystem::rename(staging, target, error);
  if (!error) return true;
  // rename(2) replaces only an empty directory; a non-empty one means another writer got there first.
  if (error == std::errc::directory_not_empty || error == std::errc::file_exists) return false;
  throw std::runtime_error(target.string() + ": cannot move the finished checkpoint into place: " + error.message());
}

void make_model(const make_model_options& options) {
  const std::filesystem::path& target = options.output_dir;
  if (target.empty()) throw std::runtime_error("make-model: no output directory given");
  std::error_code error;
  if (std::filesystem::exists(target, error) &&
      (!std::filesystem::is_directory(target, error) || !std::filesystem::is_empty(target, error))) {
    throw std::runtime_error(target.string() + ": output directory already exists and is not empty");
  }
  const std::filesystem::path staging = staging_path_for(target);
  std::filesystem::create_directories(staging);
  try {
    write_model_files(options, staging);
    if (!publish_directory(staging, target)) {
      throw std::runtime_error(target.string() + ": output directory appeared while writing; not replaced");
    }
  } catch (...) {
    std::filesystem::remove_all(staging, error);
    throw;
  }
}

}  // namespace troupe
