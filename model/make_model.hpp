#pragma once
// Random-weight checkpoints in the exact Hugging Face layout, for tests,
// benchmarks and the demo model: config.json as transformers 5 writes it for
// the architecture, safetensors weights (sharded with an index when larger
// than the shard limit), generation_config.json and tokenizer files.
// Weights are a pure function of (seed, tensor, element index), streamed to
// disk chunk by chunk, so an 8B checkpoint never sits in memory.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.hpp"
#include "model/model_config.hpp"

namespace troupe {

/// Model sizes make_model knows.
///  - tiny:  hidden 128, 4 layers, 4 heads / 2 kv, head_dim 32, FFN 384, vocab = tokenizer size rounded up to 64
///  - small: hidden 512, 8 layers, 8 heads / 4 kv, head_dim 64, FFN 1536, vocab as tiny
///  - 1b:    Llama-3.2-1B shapes (hidden 2048, 16 layers, 32/8 heads, FFN 8192, vocab 128256, tied)
///  - 8b:    Llama-3.1-8B shapes (hidden 4096, 32 layers, 32/8 heads, FFN 14336, vocab 128256, untied)
enum class model_preset : std::uint8_t { tiny, small, one_b, eight_b };

/// Parses "tiny", "small", "1b", "8b".
std::optional<model_preset> parse_model_preset(std::string_view name);

/// What to generate.
struct make_model_options {
  model_architecture architecture = model_architecture::llama;
  model_preset preset = model_preset::tiny;
  dtype type = dtype::f32;  ///< element type of every tensor
  std::uint64_t seed = 0;
  std::filesystem::path output_dir;  ///< must not exist, or be an empty directory
  /// Copy tokenizer.json, tokenizer_config.json and chat_template.jinja from
  /// here; when unset, write the built-in byte-level BPE tokenizer.
  std::optional<std::filesystem::path> tokenizer_dir;
  std::uint64_t max_shard_bytes = 4'000'000'000;  ///< tensor bytes per shard before splitting
  bool show_progress = true;                      ///< on stderr, only when it is a terminal
};

/// Writes the checkpoint atomically: into a temporary sibling directory,
/// renamed to `output_dir` once complete. Throws std::runtime_error with a
/// clear message (bad tokenizer directory, existing output, I/O errors).
void make_model(const make_model_options& options);

/// Writes every file of the checkpoint into `directory` (which must exist)
/// without the atomic rename; make_model and the demo model build on it.
void write_model_files(const make_model_options& options, const std::filesystem::path& directory);

/// The text of the config.json make_model would write for `options`, given
/// the tokenizer's size and special ids (exposed so tests can compare it with
/// what transformers writes).
std::string make_config_json(const make_model_options& options, std::int64_t tokenizer_size,
                             std::optional<std::int64_t> bos_id, const std::vector<std::int64_t>& eos_ids);

/// Renames the finished directory `staging` to `target`. Returns false, and
/// leaves `staging` in place, when `target` already exists and is not an
/// empty directory (another writer finished first); throws on other errors.
bool publish_directory(const std::filesystem::path& staging, const std::filesystem::path& target);

/// A fresh, unique sibling path of `target` for staging (".<name>.tmp-<pid>-<n>").
std::filesystem::path staging_path_for(const std::filesystem::path& target);

}  // namespace troupe
