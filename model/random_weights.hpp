#pragma once
// The tensors of a random-weight checkpoint and their values: a pure
// function of (seed, tensor name, element index), so any chunk of any tensor
// can be produced on its own, in any order, with the same result.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "model/model_config.hpp"
#include "model/safetensors_writer.hpp"

namespace troupe {

/// How a tensor's values are drawn: roughly normal around 0 for matrices
/// (std 0.02, HF's initializer_range) and biases (std 0.1), around 1 for
/// RMSNorm weights (std 0.1), so a forward pass that drops a bias or a norm
/// weight visibly changes its output.
enum class init_kind : std::uint8_t { matrix, bias, norm };

/// One tensor to generate.
struct random_tensor {
  safetensors_entry entry;
  init_kind kind = init_kind::matrix;
};

/// Every tensor a checkpoint for `config` holds, HF names, in file order
/// (embeddings, layers 0..L-1, final norm, lm_head unless tied), all of `type`.
std::vector<random_tensor> random_checkpoint_tensors(const model_config& config, dtype type);

/// Writes `count` = out.size() / element size values, elements
/// [first_element, first_element + count) of `tensor`, into `out`.
void fill_random_values(std::uint64_t seed, const random_tensor& tensor, std::uint64_t first_element,
                        std::span<std::byte> out);

/// Writes the tensors into `directory` as model.safetensors, or, when their
/// bytes exceed `max_shard_bytes`, as model-0000i-of-0000N.safetensors
/// shards plus model.safetensors.index.json. `on_written` gets the total
/// bytes written so far.
void write_random_weights(const std::filesystem::path& directory, const std::vector<random_tensor>& tensors,
                          std::uint64_t seed, std::uint64_t max_shard_bytes,
                          const std::function<void(std::uint64_t)>& on_written);

}  // namespace troupe
