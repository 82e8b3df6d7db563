// `troupe generate --speculative ...`: the prompts through an embedded
// engine, every request submitted at once, outputs printed in prompt order.

#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <random>

#include "model/model_files.hpp"
#include "tools/cli/generate_flags.hpp"
#include "troupe/engine.hpp"

namespace troupe::cli {
namespace {

// Collects one request's tokens and text; wait() returns when it ended.
class collecting_sink final : public request_sink {
 public:
  void on_accepted(const accepted_event&) override {}
  void on_delta(const delta_event& event) override {
    std::lock_guard lock(mutex_);
    text_ += event.text;
    tokens_.insert(tokens_.end(), event.token_ids.begin(), event.token_ids.end());
    arrivals_.push_back({std::chrono::steady_clock::now(), event.token_ids.size()});
  }
  void on_finished(const finished_event& event) override {
    std::lock_guard lock(mutex_);
    reason_ = finish_reason_name(event.reason);
    if (event.request_done) done_ = true;
    done_changed_.notify_all();
  }
  void on_error(const error_event& event) override {
    std::lock_guard lock(mutex_);
    error_ = event.message;
    done_ = true;
    done_changed_.notify_all();
  }

  void wait() {
    std::unique_lock lock(mutex_);
    done_changed_.wait(lock, [this] { return done_; });
  }
  const std::vector<std::int32_t>& tokens() const { return tokens_; }
  const std::string& text() const { return text_; }
  const std::string& reason() const { return reason_; }
  const std::string& error() const { return error_; }
  /// When each delta arrived and how many tokens it carried.
  const std::vector<std::pair<std::chrono::steady_clock::time_point, std::size_t>>& arrivals() const {
    return arrivals_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::vector<std::int32_t> tokens_;
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::size_t>> arrivals_;
  std::string text_, reason_, error_;
};

engine_config config_from(const generate_flags& flags) {
  engine_config config;
  config.model_dir = flags.model.model_dir;
  config.device = flags.model.device;
  config.threads = flags.model.threads;
  config.batch_invariant = flags.batch_invariant;
  config.quantization = flags.model.quantization;
  config.lm_head_quantization = flags.model.lm_head_quantization;
  config.speculative = flags.speculation.speculative;
  config.num_speculative_tokens = flags.speculation.speculative == "off" ? 0 : flags.speculation.num_speculative_tokens;
  config.draft_model = flags.speculation.draft_model;
  config.draft_quantization = flags.speculation.draft_quantization;
  config.draft_vocab_size = flags.speculation.draft_vocab_size;
  config.speculative_skip_layers = flags.speculation.speculative_skip_layers;
  config.speculative_tree_width = flags.speculation.speculative_tree_width;
  config.draft_threads = flags.speculation.draft_threads;
  config.speculative_draft_ahead = flags.speculation.speculative_draft_ahead;
  config.speculative_turn_down = flags.speculation.speculative_turn_down;
  // An offline run knows its sequences: the automatic KV pool holds exactly
  // them at full context, not max_num_seqs' default of 256, so a run of one
  // prompt does not fault in gigabytes at start; and as no sequence can then
  // be preempted, it needs no swap pool.
  config.max_num_seqs = std::max<int>(1, static_cast<int>(flags.prompts.size() + flags.prompt_ids.size()));
  config.swap_space_bytes = 0;
  return config;
}

std::vector<generation_request> requests_from(const generate_flags& flags, const generation_config& defaults) {
  std::vector<generation_request> requests;
  const sampling_params params = sampling_from(flags, defaults);
  const std::uint64_t seed = flags.seed.value_or(std::random_device{}());
  auto add = [&](generation_request r) {
    r.sampling = params;
    r.seed = seed + requests.size();
    r.max_tokens = flags.max_tokens;
    r.min_tokens = flags.min_tokens;
    r.ignore_eos = flags.ignore_eos;
    if (!flags.stop_token_ids.empty()) r.stop_token_ids = parse_id_list(flags.stop_token_ids, "--stop-token-ids");
    requests.push_back(std::move(r));
  };
  for (const auto& text : flags.prompts) add({.kind = prompt_kind::text, .prompt_text = text});
  for (const auto& ids : flags.prompt_ids)
    add({.kind = prompt_kind::token_ids, .prompt_token_ids = parse_id_list(ids, "--prompt-ids")});
  if (requests.empty()) throw std::runtime_error("give at least one --prompt or --prompt-ids");
  return requests;
}

// Decode speed counts the tokens that arrived once every request had its
// first token (all prefills done) over the time from then to the end.
double decode_tokens_per_s(const std::vector<std::shared_ptr<collecting_sink>>& sinks,
                           std::chrono::steady_clock::time_point end) {
  auto all_started = std::chrono::steady_clock::time_point::min();
  for (const auto& sink : sinks)
    if (!sink->arrivals().empty()) all_started = std::max(all_started, sink->arrivals().front().first);
  std::size_t tokens = 0;
  for (const auto& sink : sinks)
    for (const auto& [when, count] : sink->arrivals())
      if (when > all_started) tokens += count;
  const double seconds = std::chrono::duration<double>(end - all_started).count();
  return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0;
}

void report(const engine_stats& before, const engine_stats& after, double seconds, double decode_rate) {
  const auto tokens = after.generation_tokens - before.generation_tokens;
  const auto drafts = after.spec_decode_num_draft_tokens - before.spec_decode_num_draft_tokens;
  const auto accepted = after.spec_decode_num_accepted_tokens - before.spec_decode_num_accepted_tokens;
  const auto rounds = after.spec_decode_num_drafts - before.spec_decode_num_drafts;
  const auto steps = after.steps - before.steps;
  std::cerr << "generated " << tokens << " tokens in " << seconds << " s (" << static_cast<double>(tokens) / seconds
            << " tokens/s; decode " << decode_rate << " tokens/s) in " << steps << " steps; drafts: " << rounds
            << " runs, " << drafts << " tokens, " << accepted << " accepted ("
            << (drafts ? 100.0 * static_cast<double>(accepted) / drafts : 0.0) << "%), mean accepted per run "
            << (rounds ? static_cast<double>(accepted) / rounds : 0.0) << "; drafted ahead "
            << after.spec_decode_num_ahead_drafts - before.spec_decode_num_ahead_drafts << ", used "
            << after.spec_decode_num_ahead_used - before.spec_decode_num_ahead_used << "\n";
}

}  // namespace

void generate_with_engine(const generate_flags& flags) {
  if (flags.logprobs >= 0) throw std::runtime_error("--logprobs is not reported with --speculative");
  auto engine = engine::start(config_from(flags));
  const generation_config defaults = load_model_generation_config(engine->info().model_dir);
  std::vector<generation_request> requests = requests_from(flags, defaults);
  std::vector<std::shared_ptr<collecting_sink>> sinks;
  const engine_stats before = engine->stats();
  const auto start = std::chrono::steady_clock::now();
  for (auto& request : requests) {
    sinks.push_back(std::make_shared<collecting_sink>());
    engine->submit(std::move(request), sinks.back());
  }
  for (auto& sink : sinks) sink->wait();
  const auto end = std::chrono::steady_clock::now();
  report(before, engine->stats(), std::chrono::duration<double>(end - start).count(), decode_tokens_per_s(sinks, end));
  engine->shutdown(std::chrono::milliseconds(0));
  for (std::size_t i = 0; i < sinks.size(); ++i) {
    const collecting_sink& sink = *sinks[i];
    if (!sink.error().empty()) throw std::runtime_error("prompt " + std::to_string(i) + ": " + sink.error());
    if (flags.json) {
      boost::json::object out;
      out["token_ids"] = boost::json::value_from(sink.tokens());
      out["text"] = sink.text();
      out["finish_reason"] = sink.reason();
      std::cout << boost::json::serialize(out) << "\n";
    } else {
      if (sinks.size() > 1) std::cout << "[" << i << "] ";
      std::cout << sink.text() << "\n";
    }
  }
}

}  // namespace troupe::cli
