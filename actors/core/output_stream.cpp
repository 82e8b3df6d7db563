#include "actors/core/output_stream.hpp"

#include <stdexcept>

namespace troupe {

output_stream::output_stream(std::shared_ptr<const text::tokenizer> tokenizer, std::string request_id,
                             output_settings settings)
    : tokenizer_(std::move(tokenizer)), request_id_(std::move(request_id)), settings_(std::move(settings)) {
  choices_.reserve(static_cast<std::size_t>(settings_.n));
  for (int i = 0; i < settings_.n; ++i) {
    choice_state state{text::incremental_detokenizer(tokenizer_, settings_.skip_special_tokens), std::nullopt,
                       std::nullopt, false, false};
    if (!settings_.stop.empty()) state.matcher.emplace(settings_.stop);
    choices_.push_back(std::move(state));
  }
}

delta_event output_stream::make_delta(int choice) const {
  delta_event delta;
  delta.request_id = request_id_;
  delta.choice = choice;
  return delta;
}

token_logprobs output_stream::logprobs_of(const sample_output& sample) const {
  token_logprobs entry;
  entry.token = sample.token;
  const std::int32_t ids[1] = {sample.token};
  entry.text = tokenizer_->decode(ids, false);
  entry.logprob = sample.logprob;
  for (const auto& alternative : sample.top) {
    const std::int32_t alt[1] = {alternative.token};
    entry.top.emplace_back(tokenizer_->decode(alt, false), alternative.logprob);
    entry.top_ids.push_back(alternative.token);
  }
  return entry;
}

// Runs `text` through the choice's stop-string matcher: returns what may be
// sent now and records a match.
std::string output_stream::pass_stops(choice_state& state, std::string text) {
  if (!state.matcher) return text;
  text::stop_scan scan = state.matcher->push(text);
  if (scan.match) {
    state.stopped = true;
    state.stop_reason = settings_.stop[scan.match->stop_index];
  }
  return std::move(scan.text);
}

token_outcome output_stream::on_token(int choice, const sample_output& sample) {
  if (choice < 0 || choice >= settings_.n) throw std::out_of_range("output_stream: choice out of range");
  choice_state& state = choices_[static_cast<std::size_t>(choice)];
  token_outcome outcome;
  if (state.stopped || state.finished) return outcome;
  delta_event delta = make_delta(choice);
  delta.text = pass_stops(state, state.detokenizer.push(sample.token));
  delta.token_ids.push_back(sample.token);
  if (settings_.logprobs) delta.logprobs.push_back(logprobs_of(sample));
  outcome.delta = std::move(delta);
  outcome.stop_string_matched = state.stopped;
  return outcome;
}

finish_outcome output_stream::on_finished(int choice, finish_reason reason, const usage_info& usage,
                                          bool request_done) {
  if (choice < 0 || choice >= settings_.n) throw std::out_of_range("output_stream: choice out of range");
  choice_state& state = choices_[static_cast<std::size_t>(choice)];
  finish_outcome outcome;
  if (state.finished) return outcome;
  if (!state.stopped) {
    std::string rest = pass_stops(state, state.detokenizer.finish());
    if (!state.stopped && state.matcher) rest += state.matcher->flush();
    if (!rest.empty()) {
      delta_event delta = make_delta(choice);
      delta.text = std::move(rest);
      outcome.delta = std::move(delta);
    }
  }
  finished_event finished;
  finished.request_id = request_id_;
  finished.choice = choice;
  finished.reason = state.stopped ? finish_reason::stop : reason;
  finished.stop_reason = state.stop_reason;
  finished.usage = usage;
  finished.request_done = request_done;
  state.finished = true;
  outcome.finished = std::move(finished);
  return outcome;
}

}  // namespace troupe
