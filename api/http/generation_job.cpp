#include "api/http/generation_job.hpp"

#include <boost/json/serialize.hpp>
#include <chrono>

#include "api/http/ws_protocol.hpp"

namespace troupe::api {

namespace {

response_identity make_identity(const parsed_generation& request) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return {request.endpoint, make_response_id(request.endpoint),
          std::chrono::duration_cast<std::chrono::seconds>(now).count(), request.model};
}

}  // namespace

generation_job::generation_job(parsed_generation request, job_options options)
    : request_(std::move(request)),
      options_(std::move(options)),
      builder_(make_identity(request_), options_.mode == output_mode::sse && request_.include_usage),
      prompts_(request_.prompts.size()),
      choices_(request_.prompts.size() * static_cast<std::size_t>(request_.n)) {
  if (!request_.stream || request_.tools.family == tool_call_family::none) return;
  for (choice_state& choice : choices_) choice.parser.emplace(request_.tools.family);
}

generation_job::~generation_job() { cancel(); }

void generation_job::start(engine& engine, strand_post post) {
  engine_ = &engine;
  const std::size_t count = request_.prompts.size();
  if (options_.in_flight) *options_.in_flight += static_cast<std::int64_t>(count);
  for (std::size_t p = 0; p < count; ++p) prompts_[p].running = true;
  try {
    for (std::size_t p = 0; p < count && !finished_; ++p) {
      generation_request request = request_.prompts[p];
      request.request_id = count == 1 ? response_id() : response_id() + "-" + std::to_string(p);
      request.origin = options_.origin;
      engine_ids_.push_back(request.request_id);
      engine_ids_.back() = engine.submit(std::move(request), make_sink(p, post));
    }
  } catch (...) {
    fail(current_exception_as_api_error());
  }
}

std::shared_ptr<request_sink> generation_job::make_sink(std::size_t prompt, const strand_post& post) {
  auto sink = std::make_shared<callback_sink>();
  std::weak_ptr<generation_job> weak = weak_from_this();
  sink->accepted = [post, weak, prompt](const accepted_event& event) {
    post([weak, prompt, event] {
      if (auto job = weak.lock()) job->handle_accepted(prompt, event);
    });
  };
  sink->delta = [post, weak, prompt](const delta_event& event) {
    post([weak, prompt, event]() mutable {
      if (auto job = weak.lock()) job->handle_delta(prompt, std::move(event));
    });
  };
  sink->finished = [post, weak, prompt](const finished_event& event) {
    post([weak, prompt, event] {
      if (auto job = weak.lock()) job->handle_finished(prompt, event);
    });
  };
  sink->error = [post, weak, prompt](const error_event& event) {
    post([weak, prompt, event] {
      if (auto job = weak.lock()) job->handle_error(prompt, event);
    });
  };
  return sink;
}

int generation_job::choice_index(std::size_t prompt, int choice) const {
  if (choice < 0 || choice >= request_.n) return -1;  // an engine bug; never index out of range
  return static_cast<int>(prompt) * request_.n + choice;
}

void generation_job::handle_accepted(std::size_t prompt, const accepted_event& event) {
  if (finished_) return;
  prompts_[prompt].accepted = true;
  prompts_[prompt].prompt_text = event.prompt_text;
  prompts_[prompt].usage.prompt_tokens = event.prompt_tokens;
  maybe_start_stream();
}

void generation_job::handle_delta(std::size_t prompt, delta_event event) {
  const int index = choice_index(prompt, event.choice);
  if (finished_ || index < 0) return;
  if (request_.stream && !started_) {
    prompts_[prompt].accepted = true;
    early_events_.emplace_back(prompt, std::move(event));
    return maybe_start_stream();
  }
  choice_state& choice = choices_[static_cast<std::size_t>(index)];
  if (!request_.stream) {
    choice.text += event.text;
    choice.logprobs.insert(choice.logprobs.end(), event.logprobs.begin(), event.logprobs.end());
    return;
  }
  if (event.text.empty() && event.logprobs.empty()) return;  // text held back (stop strings, UTF-8)
  if (choice.parser) {
    std::vector<tool_call_event> parsed = choice.parser->feed(event.text);
    stream_parsed(index, std::move(parsed), std::move(event));
    return notify_frames();
  }
  event.choice = index;
  if (auto queue = options_.queue.lock()) queue->push_delta(options_.stream_key, shared_from_this(), event);
  notify_frames();
}

void generation_job::handle_finished(std::size_t prompt, const finished_event& event) {
  const int index = choice_index(prompt, event.choice);
  if (finished_ || index < 0) return;
  if (request_.stream && !started_) {
    prompts_[prompt].accepted = true;
    early_events_.emplace_back(prompt, event);
    return maybe_start_stream();
  }
  choice_state& choice = choices_[static_cast<std::size_t>(index)];
  choice.reason = event.reason;
  choice.stop_reason = event.stop_reason;
  if (request_.stream) {
    if (choice.parser) stream_parsed(index, choice.parser->finish(), {});
    push_frame(index, builder_.finish(index, event.reason, event.stop_reason, !choice.calls.empty()));
  }
  if (!event.request_done) return notify_frames();
  prompts_[prompt].usage = event.usage;
  release_prompt(prompt);
  for (const prompt_state& state : prompts_) {
    if (state.running) return notify_frames();
  }
  complete();
}

void generation_job::handle_error(std::size_t prompt, const error_event& event) {
  if (finished_) return;
  release_prompt(prompt);
  fail(api_error_from_engine(event));
}

void generation_job::maybe_start_stream() {
  if (started_ || !request_.stream) return;
  for (const prompt_state& state : prompts_) {
    if (!state.accepted) return;
  }
  started_ = true;
  if (options_.mode == output_mode::sse && options_.listener) options_.listener->job_stream_started(*this);
  for (std::size_t p = 0; p < prompts_.size(); ++p) {
    for (int c = 0; c < request_.n; ++c) {
      const int index = choice_index(p, c);
      if (request_.endpoint == endpoint_kind::chat) {
        push_frame(index, builder_.role(index));
      } else if (request_.echo) {
        push_frame(index, builder_.text(index, prompts_[p].prompt_text, nullptr));
      }
      if (request_.echo) choices_[static_cast<std::size_t>(index)].text_offset = prompts_[p].prompt_text.size();
    }
  }
  std::vector<early_event> replay = std::move(early_events_);
  for (auto& [prompt, event] : replay) {
    if (auto* delta = std::get_if<delta_event>(&event)) {
      handle_delta(prompt, std::move(*delta));
    } else {
      handle_finished(prompt, std::get<finished_event>(event));
    }
  }
  if (!finished_) notify_frames();
}

void generation_job::complete() {
  usage_info total;
  for (const prompt_state& state : prompts_) {
    total.prompt_tokens += state.usage.prompt_tokens;
    total.cached_prompt_tokens += state.usage.cached_prompt_tokens;
    total.completion_tokens += state.usage.completion_tokens;
  }
  if (options_.mode == output_mode::aggregate) {
    std::vector<choice_result> results;
    for (std::size_t i = 0; i < choices_.size(); ++i) results.push_back(finished_choice(i));
    http_reply reply;
    reply.body = boost::json::serialize(response_json(builder_.identity(), results, total, request_.logprobs));
    if (options_.listener) options_.listener->job_reply(*this, std::move(reply));
  } else if (options_.mode == output_mode::sse) {
    if (request_.include_usage) push_frame(-1, builder_.usage(total));
    push_bytes(-1, std::string(sse_done_event));
  } else {
    std::vector<std::string> reasons;
    for (const choice_state& choice : choices_) {
      const finish_reason reason = choice.reason.value_or(finish_reason::abort);
      reasons.emplace_back(request_.endpoint == endpoint_kind::chat ? chat_finish_reason(reason, !choice.calls.empty())
                                                                    : finish_reason_name(reason));
    }
    push_bytes(-1, ws_done_frame(options_.client_id, reasons, total));
  }
  end(true);
}

choice_result generation_job::finished_choice(std::size_t i) {
  const std::string& prefix = request_.echo ? prompts_[i / static_cast<std::size_t>(request_.n)].prompt_text : "";
  choice_state& choice = choices_[i];
  choice_result result{static_cast<int>(i),
                       prefix + choice.text,
                       prefix.size(),
                       std::move(choice.logprobs),
                       choice.reason.value_or(finish_reason::abort),
                       choice.stop_reason};
  if (request_.tools.family == tool_call_family::none) return result;
  parsed_tool_calls parsed = parse_tool_calls(request_.tools.family, choice.text);
  result.text = std::move(parsed.content);
  for (const tool_call_event& call : parsed.calls) {
    if (call.index > 0 && !request_.tools.parallel) break;
    result.tool_calls.push_back({make_tool_call_id(request_.tools.family), call.name, call.arguments});
  }
  return result;
}

void generation_job::stream_parsed(int index, std::vector<tool_call_event> parsed, delta_event event) {
  event.choice = index;
  event.text.clear();
  bool carried = false;
  auto queue = options_.queue.lock();
  for (const tool_call_event& piece : parsed) {
    if (piece.index >= 0) {
      stream_tool_call(index, piece);
      continue;
    }
    delta_event content = carried ? delta_event{} : std::move(event);
    content.choice = index;
    content.text = piece.text;
    if (queue) queue->push_delta(options_.stream_key, shared_from_this(), content);
    carried = true;
  }
  if (!carried && !event.logprobs.empty() && queue) queue->push_delta(options_.stream_key, shared_from_this(), event);
}

void generation_job::stream_tool_call(int index, const tool_call_event& call) {
  choice_state& choice = choices_[static_cast<std::size_t>(index)];
  if (call.index > 0 && !request_.tools.parallel) return;
  rendered_tool_call rendered{make_tool_call_id(request_.tools.family), call.name, call.arguments};
  const int call_index = static_cast<int>(choice.calls.size());
  push_frame(index, builder_.tool_call_start(index, call_index, rendered));
  push_frame(index, builder_.tool_call_arguments(index, call_index, rendered.arguments));
  choice.calls.push_back(std::move(rendered));
}

void generation_job::fail(const api_error& error) {
  if (finished_) return;
  if (options_.mode == output_mode::aggregate || (options_.mode == output_mode::sse && !started_)) {
    if (options_.listener) options_.listener->job_reply(*this, error_reply(error));
  } else if (options_.mode == output_mode::sse) {
    push_frame(-1, boost::json::object{{"error", error_object(error)}});
    push_bytes(-1, std::string(sse_done_event));
  } else {
    push_bytes(-1, ws_error_frame(options_.client_id, error));
  }
  end(true);
}

void generation_job::cancel() {
  if (!finished_) end(false);
}

void generation_job::cancel_in_engine() {
  if (finished_ || engine_ == nullptr) return;
  for (std::size_t p = 0; p < prompts_.size() && p < engine_ids_.size(); ++p) {
    if (prompts_[p].running) engine_->cancel(engine_ids_[p]);
  }
}

void generation_job::end(bool notify) {
  finished_ = true;
  early_events_.clear();
  for (std::size_t p = 0; p < prompts_.size(); ++p) {
    if (prompts_[p].running && engine_ != nullptr && p < engine_ids_.size()) engine_->cancel(engine_ids_[p]);
    release_prompt(p);
  }
  std::shared_ptr<job_listener> listener = std::move(options_.listener);
  if (notify && listener) {
    if (options_.mode != output_mode::aggregate) listener->job_frames_queued(*this);
    listener->job_finished(*this);
  }
}

void generation_job::release_prompt(std::size_t prompt) {
  if (!prompts_[prompt].running) return;
  prompts_[prompt].running = false;
  if (options_.in_flight) --*options_.in_flight;
}

std::string generation_job::frame(const boost::json::value& chunk) const {
  if (options_.mode == output_mode::websocket) return ws_delta_frame(options_.client_id, chunk);
  return sse_event(chunk);
}

void generation_job::push_frame(int choice, const boost::json::value& chunk) { push_bytes(choice, frame(chunk)); }

void generation_job::push_bytes(int choice, std::string bytes) {
  if (auto queue = options_.queue.lock()) queue->push_frame(options_.stream_key, choice, std::move(bytes));
}

void generation_job::notify_frames() {
  if (options_.listener && !finished_) options_.listener->job_frames_queued(*this);
}

std::string generation_job::render_delta(const pending_delta& delta) {
  choice_state& choice = choices_[static_cast<std::size_t>(delta.choice)];
  boost::json::value logprobs;
  if (request_.logprobs) {
    logprobs = request_.endpoint == endpoint_kind::chat ? chat_logprobs_json(delta.logprobs)
                                                        : completion_logprobs_json(delta.logprobs, choice.text_offset);
  }
  return frame(builder_.text(delta.choice, delta.text, std::move(logprobs)));
}

}  // namespace troupe::api
