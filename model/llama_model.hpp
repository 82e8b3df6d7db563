#pragma once
// The Llama-family decoder (Llama 2/3, Mistral, Qwen2, Qwen3), written once
// against kernels/backend.hpp. It owns the uploaded weights and the step
// workspace; the KV pool is passed in per step so several executors (streams)
// can share one model's weights.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "model/checkpoint.hpp"

namespace troupe {

/// True when `auto` gives a model described by `config` a 4-bit LM head
/// whose best logits are rescored exactly on `device` (beside 4- or 5-bit
/// layers): the head is tied to the embeddings and the backend's rescoring
/// is known to cost less than the bytes the head saves
/// (backend::logit_refinement_pays).
bool lm_head_rescored_by_default(const model_config& config, const backend& device);

class llama_model;

/// The decoder projections' formats in words: `quantization`'s name, and
/// how many projections hold another format, e.g. "int4_asym (16 of 112
/// projections int8)" (7 a layer).
std::string describe_linear_formats(const llama_model& model, weight_quantization quantization);

class llama_model {
 public:
  /// Uploads `weights` of a model described by `config` to `backend`. The
  /// checkpoint behind `weights` must outlive the model (views may point
  /// into its mapping). Throws std::runtime_error on unusable weights.
  /// `quantization` converts the linear layers at load and `lm_head` the
  /// LM head (nullopt: lm_head_quantization(quantization, "auto",
  /// lm_head_rescored_by_default(config, backend))); embeddings keep their type. A
  /// head of fewer than 8 bits tied to the embeddings has its best logits
  /// rescored exactly from them where the backend can (backend::refine_logits).
  /// `head_rows` > 0 keeps only the head's first `head_rows` rows (at most
  /// vocab_size; a drafter's frequent ids): logits rows are then that wide.
  llama_model(const model_config& config, const model_weights& weights, backend& backend,
              weight_quantization quantization = weight_quantization::none,
              std::optional<weight_quantization> lm_head = std::nullopt, std::int64_t head_rows = 0);
  /// A self-speculative drafter: `source`'s uploaded weights, shared (not
  /// copied), with only the decoder layers `layers` (ascending indices into
  /// source's, none repeated) run, on `backend` (a second backend of the same
  /// kind, e.g. its own CPU threads or CUDA stream). Its own KV cache holds
  /// the kept layers only (kv_spec); a drafter of the first layers can run
  /// on the source's cache instead (its layer i is the source's layer i).
  /// `source` must outlive it. Throws
  /// std::invalid_argument on an empty or bad layer list or a backend of another kind.
  llama_model(const llama_model& source, backend& backend, std::vector<int> layers);
  ~llama_model();
  llama_model(const llama_model&) = delete;
  llama_model& operator=(const llama_model&) = delete;

  const model_config& config() const { return config_; }
  const attention_geometry& geometry() const { return geometry_; }
  backend& device() const { return backend_; }
  std::int64_t vocab_size() const { return config_.vocab_size; }
  /// Logits per row: vocab_size, or the head_rows it was built with (ids [0, logits_width)).
  std::int64_t logits_width() const { return logits_width_; }
  /// The formats decoder layer `layer` (an index into the checkpoint's
  /// layers) holds its q, k, v, o, gate, up and down projections in: the
  /// model's quantization, a projection kept in codes of another format in
  /// theirs (a GGUF Q4_K_M's Q6_K ones as int6 beside its Q4_K layers, a
  /// Q3_K_M's Q4_K ones as int4_asym beside its Q3_K layers as int4_g16), or
  /// int8 for one stored in codes troupe does not keep (Q8_0, Q2_K) beside
  /// layers kept as stored; a stack of q/k/v or gate/up then runs as
  /// one linear per format.
  std::array<weight_quantization, 7> projection_formats(int layer) const;
  /// Bytes of the linear weights one step reads: the projections of the
  /// layers it runs and the LM head, as the backend holds them
  /// (linear_weight::weight_bytes).
  std::size_t linear_weight_bytes() const;
  /// Decoder layers this model runs (all of the checkpoint's, unless built as a layer-skipping drafter).
  int num_layers() const { return static_cast<int>(active_layers_.size()); }

  /// KV pool shape for this model: `num_blocks` blocks of `block_size` tokens
  /// in `type` (f32, bf16 or f16).
  kv_cache_spec kv_spec(int block_size, std::int64_t num_blocks, dtype type) const;
  /// Bytes one KV block takes (all layers, K and V) at `block_size` tokens in `type`.
  std::size_t kv_block_bytes(int block_size, dtype type) const;

  /// Bytes of the step workspace per token of a step (its activations).
  std::size_t workspace_bytes_per_token() const;
  /// Bytes of the step workspace per logits row (its hidden state and f32 logits).
  std::size_t workspace_bytes_per_row() const;
  /// Caps the step workspace at `bytes` (0: no cap): a step whose tokens
  /// and logits rows need more throws std::length_error before allocating.
  void set_workspace_limit(std::size_t bytes) { workspace_limit_ = bytes; }

  /// Runs one step: the batch's block copies, then the forward pass over its
  /// T tokens. Returns the logits, f32 [L, logits_width] for the batch's logits
  /// rows, in backend memory valid until the next call. `host` may be null
  /// when the batch has no host copies.
  tensor_view forward(const step_batch& batch, kv_cache& cache, host_block_pool* host);
  /// forward() then samples every logits row with the batch's sampling rows
  /// and verifies its verify groups (backend::sample). Throws
  /// std::logic_error on a model with a narrowed head (logits_width < vocab_size).
  sample_result step(const step_batch& batch, kv_cache& cache, host_block_pool* host);
  /// forward() then copies the logits to the host: [L * logits_width] floats, row major.
  std::vector<float> logits(const step_batch& batch, kv_cache& cache, host_block_pool* host);

 private:
  struct layer;
  struct uploaded;
  struct workspace;

  void upload_weights(const model_weights& weights, weight_quantization quantization, weight_quantization lm_head);
  void ensure_workspace(std::int64_t tokens, std::int64_t logits_rows);
  void run_layer(const layer& weights, int index, const step_plan& plan, kv_cache& cache, std::int64_t tokens,
                 bool first);

  model_config config_;
  backend& backend_;
  attention_geometry geometry_;
  std::shared_ptr<const uploaded> weights_;  ///< shared with layer-skipping drafters
  std::vector<int> active_layers_;           ///< indices into weights_->layers, in run order
  std::int64_t logits_width_ = 0;            ///< rows of the LM head: vocab_size or fewer
  bool refine_head_ = false;                 ///< rescore the best logits of a tied 4-bit head from the embeddings
  std::unique_ptr<workspace> workspace_;
  std::unique_ptr<step_plan> plan_;
  std::size_t workspace_limit_ = 0;  ///< bytes; 0: none
};

}  // namespace troupe
