#include "model/random_weights.hpp"

#include <algorithm>
#include <boost/json/value.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include "model/python_json.hpp"

namespace troupe {

namespace {

constexpr std::uint64_t golden_gamma = 0x9E3779B97F4A7C15ull;

std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t name_key(std::uint64_t seed, const std::string& name) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : name) hash = (hash ^ c) * 0x100000001b3ull;
  return mix64(seed * golden_gamma ^ hash);
}

// A 32-bit integer hash with good avalanche (Wellons' "lowbias32").
std::uint32_t hash32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Elements are generated in blocks of this many so that the loops have a
// constant trip count and vectorise even at -O2.
constexpr std::size_t block_size = 64;

// Values of elements [first, first + block_size), all with the same upper
// 32 index bits. Each is a sample of the triangular distribution on (-1, 1)
// (std 1/sqrt(6)), the sum of two 16-bit uniforms from one hash: close
// enough to normal for weights, and cheap enough that writing a checkpoint
// stays I/O-bound.
void random_block(std::uint64_t key, std::uint64_t first, float center, float scale, float* __restrict out) {
  const auto block_key = static_cast<std::uint32_t>(mix64(key + (first >> 32)));
  const auto low = static_cast<std::uint32_t>(first);
  for (std::size_t i = 0; i < block_size; ++i) {
    const std::uint32_t bits = hash32((low + static_cast<std::uint32_t>(i)) * 0x9E3779B9u ^ block_key);
    const auto u1 = static_cast<float>(static_cast<std::int32_t>(bits & 0xffffu));
    const auto u2 = static_cast<float>(static_cast<std::int32_t>(bits >> 16));
    out[i] = center + scale * ((u1 + u2 + 1.0f) * (1.0f / 65536.0f) - 1.0f);
  }
}

void store_block(const float* __restrict values, dtype type, std::size_t count, std::byte* out) {
  if (type == dtype::f32) {
    std::memcpy(out, values, count * 4);
    return;
  }
  std::uint16_t halves[block_size];
  if (type == dtype::bf16) {
    for (std::size_t i = 0; i < block_size; ++i) halves[i] = float_to_bf16(values[i]);
  } else {
    for (std::size_t i = 0; i < block_size; ++i) halves[i] = float_to_f16(values[i]);
  }
  std::memcpy(out, halves, count * 2);
}

void add_entry(std::vector<random_tensor>& out, std::string name, std::vector<std::int64_t> shape, dtype type,
               init_kind kind) {
  out.push_back({{std::move(name), type, std::move(shape)}, kind});
}

void add_layer(std::vector<random_tensor>& out, const model_config& config, std::int64_t index, dtype type) {
  const std::string p = "model.layers." + std::to_string(index) + ".";
  const std::int64_t h = config.hidden_size, q = config.q_size(), kv = config.kv_size();
  const std::int64_t ffn = config.intermediate_size;
  add_entry(out, p + "input_layernorm.weight", {h}, type, init_kind::norm);
  add_entry(out, p + "self_attn.q_proj.weight", {q, h}, type, init_kind::matrix);
  if (config.qkv_bias) add_entry(out, p + "self_attn.q_proj.bias", {q}, type, init_kind::bias);
  add_entry(out, p + "self_attn.k_proj.weight", {kv, h}, type, init_kind::matrix);
  if (config.qkv_bias) add_entry(out, p + "self_attn.k_proj.bias", {kv}, type, init_kind::bias);
  add_entry(out, p + "self_attn.v_proj.weight", {kv, h}, type, init_kind::matrix);
  if (config.qkv_bias) add_entry(out, p + "self_attn.v_proj.bias", {kv}, type, init_kind::bias);
  if (config.qk_norm) {
    add_entry(out, p + "self_attn.q_norm.weight", {config.head_dim}, type, init_kind::norm);
    add_entry(out, p + "self_attn.k_norm.weight", {config.head_dim}, type, init_kind::norm);
  }
  add_entry(out, p + "self_attn.o_proj.weight", {h, q}, type, init_kind::matrix);
  if (config.o_bias) add_entry(out, p + "self_attn.o_proj.bias", {h}, type, init_kind::bias);
  add_entry(out, p + "post_attention_layernorm.weight", {h}, type, init_kind::norm);
  add_entry(out, p + "mlp.gate_proj.weight", {ffn, h}, type, init_kind::matrix);
  add_entry(out, p + "mlp.up_proj.weight", {ffn, h}, type, init_kind::matrix);
  add_entry(out, p + "mlp.down_proj.weight", {h, ffn}, type, init_kind::matrix);
}

std::string shard_name(std::size_t index, std::size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw std::runtime_error(path.string() + ": cannot write");
}

}  // namespace

std::vector<random_tensor> random_checkpoint_tensors(const model_config& config, dtype type) {
  std::vector<random_tensor> out;
  add_entry(out, "model.embed_tokens.weight", {config.vocab_size, config.hidden_size}, type, init_kind::matrix);
  for (std::int64_t i = 0; i < config.num_hidden_layers; ++i) add_layer(out, config, i, type);
  add_entry(out, "model.norm.weight", {config.hidden_size}, type, init_kind::norm);
  if (!config.tie_word_embeddings) {
    add_entry(out, "lm_head.weight", {config.vocab_size, config.hidden_size}, type, init_kind::matrix);
  }
  return out;
}

void fill_random_values(std::uint64_t seed, const random_tensor& tensor, std::uint64_t first_element,
                        std::span<std::byte> out) {
  const std::uint64_t key = name_key(seed, tensor.entry.name);
  const float scale = (tensor.kind == init_kind::matrix ? 0.02f : 0.1f) * std::sqrt(6.0f);
  const float center = tensor.kind == init_kind::norm ? 1.0f : 0.0f;
  const dtype type = tensor.entry.type;
  const std::size_t count = out.size() / dtype_size(type);
  alignas(64) float values[block_size] = {};
  for (std::size_t done = 0; done < count;) {
    const std::uint64_t element = first_element + done;
    // A block never straddles a 2^32 boundary of the element index.
    const std::uint64_t to_boundary = (std::uint64_t{1} << 32) - (element & 0xffffffffu);
    const std::size_t length =
        static_cast<std::size_t>(std::min<std::uint64_t>({block_size, count - done, to_boundary}));
    if (length == block_size) {
      random_block(key, element, center, scale, values);
    } else {
      float tail[block_size] = {};
      for (std::size_t i = 0; i < length; ++i) {
        random_block(key, element + i, center, scale, tail);
        values[i] = tail[0];
      }
    }
    store_block(values, type, length, out.data() + done * dtype_size(type));
    done += length;
  }
}

void write_random_weights(const std::filesystem::path& directory, const std::vector<random_tensor>& tensors,
                          std::uint64_t seed, std::uint64_t max_shard_bytes,
                          const std::function<void(std::uint64_t)>& on_written) {
  // Greedy split in file order; a tensor larger than the limit gets a shard of its own.
  std::vector<std::vector<const random_tensor*>> shards(1);
  std::uint64_t shard_bytes = 0, total_bytes = 0, total_elements = 0;
  for (const random_tensor& tensor : tensors) {
    const std::uint64_t bytes = tensor.entry.byte_size();
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&tensor);
    shard_bytes += bytes;
    total_bytes += bytes;
    total_elements += bytes / dtype_size(tensor.entry.type);
  }
  boost::json::object weight_map;
  std::uint64_t written_before = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shards.size() == 1 ? "model.safetensors" : shard_name(s, shards.size());
    std::vector<safetensors_entry> entries;
    for (const random_tensor* tensor : shards[s]) {
      entries.push_back(tensor->entry);
      weight_map[tensor->entry.name] = name;
    }
    const auto fill = [&](std::size_t index, std::uint64_t offset, std::span<std::byte> chunk) {
      const random_tensor& tensor = *shards[s][index];
      fill_random_values(seed, tensor, offset / dtype_size(tensor.entry.type), chunk);
    };
    const auto progress = [&](std::uint64_t written) {
      if (on_written) on_written(written_before + written);
    };
    write_safetensors(directory / name, entries, {{"format", "pt"}}, fill, progress);
    for (const safetensors_entry& entry : entries) written_before += entry.byte_size();
  }
  if (shards.size() == 1) return;
  const boost::json::value index = {{"metadata", {{"total_parameters", total_elements}, {"total_size", total_bytes}}},
                                    {"weight_map", std::move(weight_map)}};
  write_text(directory / "model.safetensors.index.json", to_python_json(index) + "\n");
}

}  // namespace troupe
