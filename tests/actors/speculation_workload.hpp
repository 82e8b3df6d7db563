#pragma once
// What the speculative engine tests (CPU, and CUDA where a GPU is present)
// run: a fixture checkpoint made servable, and a workload of greedy
// requests of mixed lengths, half of them repeating their prompt (material
// for prompt lookup), a few opting out of speculation, some to be cancelled.

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine_fixture.hpp"
#include "model/checkpoint.hpp"
#include "tests/forward/forward_fixture.hpp"

namespace troupe::testing {

// The tiny test model's tokenizer cut to the fixtures' vocabulary of 320:
// the byte tokens and the first merges up to id 299, the special tokens
// renumbered after them (as HF numbers added tokens missing from the vocab).
inline std::string tokenizer_within_fixture_vocab() {
  constexpr std::int64_t kept = 300;
  std::ifstream in(tiny_model_dir() / "tokenizer.json");
  std::stringstream text;
  text << in.rdbuf();
  boost::json::value json = boost::json::parse(text.str());
  boost::json::object& model = json.at("model").as_object();
  boost::json::object vocab;
  for (const auto& [token, id] : model.at("vocab").as_object())
    if (id.as_int64() < kept) vocab[token] = id;
  boost::json::array merges;
  for (const auto& merge : model.at("merges").as_array()) {
    std::string pair(merge.as_string());
    const auto space = pair.find(' ');
    if (vocab.contains(pair.substr(0, space) + pair.substr(space + 1))) merges.push_back(merge);
  }
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);
  for (auto& processor : json.at("post_processor").at("processors").as_array()) {
    if (auto* special = processor.as_object().if_contains("special_tokens"))
      for (auto& [name, token] : special->as_object())
        token.as_object()["ids"] = boost::json::array{kept};  // <|begin_of_text|>, the first added token
  }
  return boost::json::serialize(json);
}

// A fixture checkpoint (tests/fixtures/models, made by transformers) with a
// tokenizer beside it that fits its vocabulary, which the engine needs to run.
inline std::filesystem::path servable_fixture(const std::string& name) {
  const auto source = fixture_model::fixtures_dir() / "models" / name;
  const auto dir = process_scratch_dir() / ("spec-" + name);
  if (std::filesystem::exists(dir / "tokenizer.json")) return dir;
  std::filesystem::create_directories(dir);
  for (const char* file : {"config.json", "generation_config.json", "model.safetensors"})
    std::filesystem::copy_file(source / file, dir / file, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(tiny_model_dir() / "tokenizer_config.json", dir / "tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer.json", std::ios::trunc) << tokenizer_within_fixture_vocab();
  return dir;
}

/// One request of a speculation workload.
struct planned_request {
  generation_request request;
  bool cancel = false;                 ///< cancelled right after submission
  std::vector<std::int32_t> expected;  ///< filled by the test: its reference tokens
};

/// `count` greedy requests over token ids of `ckpt`'s vocabulary, fitting its
/// context (qwen2's fixtures: 40 positions); the same for the same seed.
inline std::vector<planned_request> speculation_workload(const checkpoint& ckpt, int count, unsigned seed = 11) {
  const auto vocab = static_cast<int>(ckpt.config().vocab_size);
  const auto context = static_cast<int>(ckpt.config().max_position_embeddings);
  std::mt19937 rng(seed);
  const auto uniform = [&](int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng); };
  std::vector<planned_request> plan(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    generation_request& r = plan[static_cast<std::size_t>(i)].request;
    r.kind = prompt_kind::token_ids;
    std::vector<std::int32_t> piece(static_cast<std::size_t>(uniform(3, std::min(40, context / 4))));
    for (auto& id : piece) id = uniform(0, vocab - 1);
    r.prompt_token_ids = piece;
    if (i % 2 == 0) r.prompt_token_ids.insert(r.prompt_token_ids.end(), piece.begin(), piece.end());
    r.max_tokens = uniform(1, std::min(40, context - static_cast<int>(r.prompt_token_ids.size())));
    r.sampling.temperature = 0.0f;
    r.speculative = i % 7 != 3;
    plan[static_cast<std::size_t>(i)].cancel = i % 11 == 5;
  }
  return plan;
}

/// The engine a speculation workload runs on: `proposer` drafting up to 4
/// tokens (`draft`: the target drafting for itself, the best case),
/// `preemption`, KV blocks of `block_size` tokens and a pool far smaller
/// than the load needs (preemption), yet with room for the longest request,
/// for KV elements of `kv_element_bytes`; chunked prefill.
inline engine_config speculation_engine_config(const std::filesystem::path& dir, const std::string& proposer,
                                               const std::string& preemption, int block_size, int kv_element_bytes) {
  engine_config config = tiny_engine_config();
  config.model_dir = dir.string();
  config.speculative = proposer;
  config.num_speculative_tokens = 4;
  if (proposer == "draft") config.draft_model = dir.string();
  config.preemption_mode = preemption;
  config.block_size = block_size;
  const checkpoint ckpt = checkpoint::open(dir, {.show_progress = false});
  const std::int64_t block_bytes = 2 * ckpt.config().num_hidden_layers * ckpt.config().num_key_value_heads *
                                   ckpt.config().head_dim * block_size * kv_element_bytes;
  // Tokens, not blocks: the same pressure whatever the block size.
  const std::int64_t pool_tokens = 4 * std::min<std::int64_t>(48, ckpt.config().max_position_embeddings / 2 + 4);
  config.kv_cache_bytes = (pool_tokens / block_size) * block_bytes;
  config.swap_space_bytes = 400 * block_bytes;
  config.max_num_seqs = 12;
  config.max_num_batched_tokens = 96;
  config.max_prefill_chunk = 16;
  config.speculative_max_batch = 16;
  return config;
}

/// Submits `plan` in order, a short pause after every 12 requests, and
/// cancels the requests marked so right after their submission; their
/// sinks, in plan order.
inline std::vector<std::shared_ptr<recording_sink>> submit_workload(engine& running,
                                                                    const std::vector<planned_request>& plan) {
  std::vector<std::shared_ptr<recording_sink>> sinks;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    sinks.push_back(std::make_shared<recording_sink>());
    const std::string id = running.submit(plan[i].request, sinks.back());
    if (plan[i].cancel) running.cancel(id);
    if (i % 12 == 11) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return sinks;
}

/// The engine's stats once every KV block is free and the swap pool empty
/// again, as at `idle`, or after 10 s.
inline engine_stats stats_once_idle(engine& running, const engine_stats& idle) {
  return wait_for_stats(
      running,
      [&](const engine_stats& stats) {
        return stats.kv_blocks_free == idle.kv_blocks_free && stats.host_kv_cache_usage == 0;
      },
      std::chrono::seconds(10));
}

}  // namespace troupe::testing
