#include "model/batch_runner.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <stdexcept>

namespace troupe {

struct batch_runner::sequence {
  const runner_request* request = nullptr;
  std::vector<std::int32_t> tokens;  // prompt then generated ids
  std::int64_t num_computed = 0;     // tokens whose K/V are in the cache
  std::vector<std::int32_t> blocks;
  std::vector<std::int32_t> suppressed;
  runner_result result;
  bool done = false;
  std::int64_t step_tokens = 0;  // tokens this sequence runs in the current step
};

dtype default_kv_type(std::optional<dtype> weights, const backend& device) {
  const dtype activations = device.activation_type();
  return activations == dtype::f32 ? weights.value_or(dtype::f32) : activations;
}

batch_runner::batch_runner(llama_model& model, runner_options options) : model_(model), options_(options) {
  if (options_.block_size <= 0 || options_.max_chunk_tokens <= 0 || options_.max_step_tokens <= 0)
    throw std::invalid_argument("runner options must be positive");
}

batch_runner::~batch_runner() = default;

void batch_runner::allocate_pool(std::int64_t tokens_needed) {
  const std::int64_t blocks_needed = tokens_needed / options_.block_size + 1;
  const std::int64_t blocks = std::max(options_.num_blocks, blocks_needed);
  if (cache_ && cache_->spec().num_blocks >= blocks) return;
  const dtype kv = options_.kv_type.value_or(default_kv_type(model_.config().torch_dtype, model_.device()));
  cache_ = model_.device().create_kv_cache(model_.kv_spec(options_.block_size, blocks, kv));
  free_blocks_.resize(static_cast<std::size_t>(blocks));
  std::iota(free_blocks_.rbegin(), free_blocks_.rend(), 0);  // pop_back hands out 0, 1, 2, ...
  if (options_.block_shuffle_seed != 0) {
    std::mt19937_64 rng(options_.block_shuffle_seed);
    std::shuffle(free_blocks_.begin(), free_blocks_.end(), rng);
  }
}

void batch_runner::reserve_blocks(sequence& seq, std::int64_t new_length) {
  const auto needed = static_cast<std::size_t>((new_length + options_.block_size - 1) / options_.block_size);
  while (seq.blocks.size() < needed) {
    if (free_blocks_.empty()) throw std::runtime_error("batch runner: KV pool exhausted");
    seq.blocks.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
}

void batch_runner::release_blocks(sequence& seq) {
  free_blocks_.insert(free_blocks_.end(), seq.blocks.begin(), seq.blocks.end());
  seq.blocks.clear();
}

void batch_runner::add_sequence_tokens(step_batch& batch, sequence& seq, std::int64_t count) const {
  const std::int64_t bs = options_.block_size;
  for (std::int64_t pos = seq.num_computed; pos < seq.num_computed + count; ++pos) {
    batch.token_ids.push_back(seq.tokens[static_cast<std::size_t>(pos)]);
    batch.positions.push_back(static_cast<std::int32_t>(pos));
    batch.slot_mapping.push_back(std::int64_t{seq.blocks[static_cast<std::size_t>(pos / bs)]} * bs + pos % bs);
  }
  const std::int64_t length = seq.num_computed + count;
  const std::int64_t pages = (length + bs - 1) / bs;
  batch.query_start.push_back(static_cast<std::int32_t>(batch.token_ids.size()));
  batch.seq_lens.push_back(static_cast<std::int32_t>(length));
  batch.kv_indices.insert(batch.kv_indices.end(), seq.blocks.begin(), seq.blocks.begin() + pages);
  batch.kv_indptr.push_back(static_cast<std::int32_t>(batch.kv_indices.size()));
  batch.kv_last_page_len.push_back(static_cast<std::int32_t>(length - (pages - 1) * bs));
}

void batch_runner::record_step(const step_batch& batch, std::chrono::steady_clock::time_point start) {
  step_record record;
  record.tokens = batch.num_tokens();
  record.sequences = batch.num_sequences();
  for (std::int32_t len : batch.seq_lens) record.context_tokens += len;
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  history_.push_back(record);
}

std::vector<runner_result> batch_runner::generate(const std::vector<runner_request>& requests) {
  std::int64_t total = 0;
  for (const auto& r : requests) {
    if (r.prompt.empty()) throw std::invalid_argument("batch runner: empty prompt");
    total += static_cast<std::int64_t>(r.prompt.size()) + std::max(r.max_tokens, 0) + options_.block_size;
  }
  allocate_pool(total);
  std::vector<sequence> seqs(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    seqs[i].request = &requests[i];
    seqs[i].tokens = requests[i].prompt;
    seqs[i].done = requests[i].max_tokens <= 0;
  }
  const std::int64_t context_limit = model_.config().max_context_length;
  while (std::any_of(seqs.begin(), seqs.end(), [](const sequence& s) { return !s.done; })) {
    step_batch batch;
    batch.query_start.push_back(0);
    batch.kv_indptr.push_back(0);
    std::vector<sequence*> sampled;
    std::int64_t budget = options_.max_step_tokens;
    for (auto& seq : seqs) {
      seq.step_tokens = 0;
      if (seq.done || budget == 0) continue;
      const std::int64_t remaining = static_cast<std::int64_t>(seq.tokens.size()) - seq.num_computed;
      const std::int64_t count = std::min({remaining, std::int64_t{options_.max_chunk_tokens}, budget});
      reserve_blocks(seq, seq.num_computed + count);
      add_sequence_tokens(batch, seq, count);
      seq.step_tokens = count;
      budget -= count;
      if (seq.num_computed + count == static_cast<std::int64_t>(seq.tokens.size())) {
        const runner_request& r = *seq.request;
        const bool before_min = static_cast<int>(seq.result.tokens.size()) < r.min_tokens;
        seq.suppressed = before_min ? r.stop_token_ids : std::vector<std::int32_t>{};
        batch.logits_indices.push_back(static_cast<std::int32_t>(batch.token_ids.size()) - 1);
        batch.sampling.push_back(
            sampling_row{&r.params, r.seed, seq.result.tokens.size(), r.prompt, seq.result.tokens, seq.suppressed});
        sampled.push_back(&seq);
      }
    }
    const auto start = std::chrono::steady_clock::now();
    const std::vector<sample_output> outputs = model_.step(batch, *cache_, nullptr).rows;
    record_step(batch, start);
    for (auto& seq : seqs) seq.num_computed += seq.step_tokens;
    for (std::size_t i = 0; i < sampled.size(); ++i) {
      sequence& seq = *sampled[i];
      const std::int32_t token = outputs[i].token;
      seq.result.tokens.push_back(token);
      seq.result.samples.push_back(outputs[i]);
      seq.tokens.push_back(token);
      const auto& stops = seq.request->stop_token_ids;
      seq.result.stopped = std::find(stops.begin(), stops.end(), token) != stops.end();
      const bool at_limit = static_cast<int>(seq.result.tokens.size()) >= seq.request->max_tokens ||
                            static_cast<std::int64_t>(seq.tokens.size()) >= context_limit;
      if (seq.result.stopped || at_limit) {
        seq.done = true;
        release_blocks(seq);
      }
    }
  }
  std::vector<runner_result> results;
  results.reserve(seqs.size());
  for (auto& seq : seqs) {
    release_blocks(seq);
    results.push_back(std::move(seq.result));
  }
  return results;
}

std::vector<std::vector<float>> batch_runner::prompt_logits(const std::vector<std::vector<std::int32_t>>& prompts,
                                                            int chunk_tokens) {
  if (chunk_tokens <= 0) throw std::invalid_argument("batch runner: chunk size must be positive");
  std::int64_t total = 0;
  std::vector<sequence> seqs(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) throw std::invalid_argument("batch runner: empty prompt");
    seqs[i].tokens = prompts[i];
    total += static_cast<std::int64_t>(prompts[i].size()) + options_.block_size;
  }
  allocate_pool(total);
  const auto width = static_cast<std::size_t>(model_.logits_width());
  std::vector<std::vector<float>> logits(prompts.size());
  auto unfinished = [](const sequence& s) { return s.num_computed < static_cast<std::int64_t>(s.tokens.size()); };
  while (std::any_of(seqs.begin(), seqs.end(), unfinished)) {
    step_batch batch;
    batch.query_start.push_back(0);
    batch.kv_indptr.push_back(0);
    for (auto& seq : seqs) {
      seq.step_tokens =
          std::min<std::int64_t>(chunk_tokens, static_cast<std::int64_t>(seq.tokens.size()) - seq.num_computed);
      if (seq.step_tokens == 0) continue;
      reserve_blocks(seq, seq.num_computed + seq.step_tokens);
      for (std::int64_t row = 0; row < seq.step_tokens; ++row)
        batch.logits_indices.push_back(static_cast<std::int32_t>(batch.token_ids.size() + row));
      add_sequence_tokens(batch, seq, seq.step_tokens);
    }
    const auto start = std::chrono::steady_clock::now();
    const std::vector<float> step_logits = model_.logits(batch, *cache_, nullptr);
    record_step(batch, start);
    auto row = step_logits.begin();
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      const auto rows = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(seqs[i].step_tokens) * width);
      logits[i].insert(logits[i].end(), row, row + rows);
      row += rows;
      seqs[i].num_computed += seqs[i].step_tokens;
    }
  }
  for (auto& seq : seqs) release_blocks(seq);
  return logits;
}

}  // namespace troupe
