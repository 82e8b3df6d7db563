#pragma once
// A plain batched generation loop over llama_model with its own block
// allocator: every prompt is prefilled in chunks, then all sequences decode
// together until each stops. It is the offline path of `troupe generate`,
// `score` and `bench`, and the reference the engine's scheduler is checked
// against — so it stays small and obviously correct.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/sampling.hpp"
#include "model/llama_model.hpp"

namespace troupe {

/// How the runner lays out KV memory and splits prompts.
struct runner_options {
  int block_size = 16;                   ///< tokens per KV block
  std::int64_t num_blocks = 0;           ///< KV pool size in blocks (0: enough for the requests)
  std::optional<dtype> kv_type;          ///< KV element type (default: the model's weight type)
  int max_chunk_tokens = 512;            ///< prompt tokens of one sequence per step at most
  int max_step_tokens = 2048;            ///< tokens of one step at most
  std::uint64_t block_shuffle_seed = 0;  ///< non-zero: hand out blocks in a shuffled order
};

/// One generation request for the runner.
struct runner_request {
  std::vector<std::int32_t> prompt;
  sampling_params params;
  std::uint64_t seed = 0;
  int max_tokens = 16;
  int min_tokens = 0;
  std::vector<std::int32_t> stop_token_ids;  ///< ids that end the request (eos unless ignored, extra stop ids)
};

/// What one request produced.
struct runner_result {
  std::vector<std::int32_t> tokens;    ///< generated ids (a stop id that ended it included)
  std::vector<sample_output> samples;  ///< one per token, with logprobs when asked
  bool stopped = false;                ///< true: a stop id; false: max_tokens or context length
};

/// Timing of one step, for benchmarks.
struct step_record {
  std::int64_t tokens = 0;          ///< tokens run
  std::int64_t sequences = 0;       ///< sequences in the step
  std::int64_t context_tokens = 0;  ///< sum of the sequences' context lengths after the step
  double seconds = 0.0;             ///< wall time of forward + sampling
};

class batch_runner {
 public:
  batch_runner(llama_model& model, runner_options options);
  ~batch_runner();

  /// Generates for every request in one batch; results in request order.
  std::vector<runner_result> generate(const std::vector<runner_request>& requests);
  /// Logits of every position of every prompt, f32 [prompt.size() * vocab]
  /// per prompt, running all prompts together in the same steps, each
  /// advancing by up to `chunk_tokens` tokens per step.
  std::vector<std::vector<float>> prompt_logits(const std::vector<std::vector<std::int32_t>>& prompts,
                                                int chunk_tokens);
  /// Every step run so far, in order.
  const std::vector<step_record>& history() const { return history_; }

 private:
  struct sequence;
  void allocate_pool(std::int64_t tokens_needed);
  void reserve_blocks(sequence& seq, std::int64_t new_length);
  void release_blocks(sequence& seq);
  void add_sequence_tokens(step_batch& batch, sequence& seq, std::int64_t count) const;
  void record_step(const step_batch& batch, std::chrono::steady_clock::time_point start);

  llama_model& model_;
  runner_options options_;
  std::unique_ptr<kv_cache> cache_;
  std::vector<std::int32_t> free_blocks_;
  std::vector<step_record> history_;
};

/// Default KV element type for weights of type `weights` on `device`: the
/// checkpoint's type where activations are f32 (cpu), else the activation
/// type (cuda: bf16, whose attention reads 16-bit caches only).
dtype default_kv_type(std::optional<dtype> weights, const backend& device);

}  // namespace troupe
