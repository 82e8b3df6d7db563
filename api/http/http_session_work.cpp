// The engine work one HTTP request starts (http_session.hpp): a generation
// job, or a /tokenize or /detokenize call on the engine's tokenizer
// workers; and the disconnect watch, which cancels either when the client
// leaves before its answer.

#include <boost/asio/post.hpp>
#include <utility>

#include "api/http/http_session.hpp"
#include "api/http/response_render.hpp"

namespace troupe::api::detail {

void http_session::job_reply(generation_job&, http_reply reply) { do_write_reply(std::move(reply)); }

void http_session::job_stream_started(generation_job&) { do_write_stream_header(); }

void http_session::job_frames_queued(generation_job&) {
  if (queue_ && queue_->over_limit()) {
    // The client reads slower than the engine writes: give up on it, free the engine.
    return abandon();
  }
  if (streaming_) do_write_frames();
}

void http_session::job_finished(generation_job&) {
  job_done_ = true;
  job_.reset();
  if (streaming_) do_write_frames();
}

// Routing runs off the I/O threads: it may block on the engine (stats). A
// worker is not an I/O thread: what it throws closes the connection on its strand.
void http_session::do_route(http_request_view view) {
  net::post(state_->workers, [self = shared_from_this(), view = std::move(view)] {
    try {
      routed_request routed = route_request(view, self->state_->routes);
      if (routed.text) return self->do_text_task(std::move(*routed.text));
      net::post(self->stream_.get_executor(),
                self->guard([self, routed = std::move(routed)]() mutable { self->on_routed(std::move(routed)); }));
    } catch (...) {
      net::post(self->stream_.get_executor(),
                [self, error = std::current_exception()] { self->on_handler_exception(error); });
    }
  });
}

void http_session::on_routed(routed_request routed) {
  if (closed_) return;
  if (!routed.generation) return do_write_reply(std::move(routed.reply));
  const bool stream = routed.generation->stream;
  queue_ = std::make_shared<outgoing_queue>(state_->config.max_stream_queue_bytes);
  job_options options;
  options.mode = stream ? output_mode::sse : output_mode::aggregate;
  options.stream_key = state_->next_stream_key++;
  options.queue = queue_;
  options.listener = shared_from_this();
  options.in_flight = state_->in_flight;
  options.origin = origin_;
  auto job = std::make_shared<generation_job>(std::move(*routed.generation), std::move(options));
  job_ = job;
  job_done_ = false;
  job->start(*state_->routes.engine, guarded_post(weak_from_this(), state_->gate->make_post(stream_.get_executor())));
  do_watch_disconnect();
}

/// /tokenize and /detokenize run on the engine's tokenizer workers, not on
/// the route workers, so /health and /metrics answer while big ones run.
/// Called on a route worker (touching nothing of the strand's): an engine
/// that runs text tasks inline (run_text_task's default) does so there,
/// never on an I/O thread.
void http_session::do_text_task(text_task task) {
  task.origin = origin_;
  task.id = "text-" + random_hex(16);
  strand_post post = guarded_post(weak_from_this(), state_->gate->make_post(stream_.get_executor()));
  auto self = shared_from_this();
  state_->routes.engine->run_text_task(task, [self, post, task](text_task_result result) {
    post([self, task, result = std::move(result)] { self->on_text_task(task, result); });
  });
  // Posted after the engine has the task, so a cancel on disconnect cannot overtake it.
  post([self, id = task.id] { self->on_text_task_queued(id); });
}

void http_session::on_text_task_queued(const std::string& id) {
  if (id == answered_text_task_id_) return;               // answered already (an engine that ran it at once)
  if (closed_) return state_->routes.engine->cancel(id);  // closed meanwhile (the server stopping)
  text_task_id_ = id;
  do_watch_disconnect();
}

void http_session::on_text_task(const text_task& task, const text_task_result& result) {
  answered_text_task_id_ = task.id;
  text_task_id_.clear();
  if (closed_) return;
  do_write_reply(text_task_reply(task, result, state_->routes));
}

/// While the engine works nothing is read: EOF or a reset means the client
/// left and its engine work must be cancelled. Bytes it pipelined meanwhile
/// (up to one more request's worth) are kept for the next request.
void http_session::do_watch_disconnect() {
  const std::size_t limit = state_->config.max_header_bytes + state_->config.max_body_bytes;
  auto self = shared_from_this();
  watch_.start(
      stream_.socket(), buffer_, limit,
      [self] { return !self->closed_ && (self->job_ || self->streaming_ || !self->text_task_id_.empty()); },
      guard([this] { abandon(); }));
}

// The client is gone: the engine stops the job's requests, and drops the
// text task unless a worker already runs it.
void http_session::cancel_work() {
  if (auto job = std::move(job_)) job->cancel();
  if (!text_task_id_.empty()) state_->routes.engine->cancel(std::exchange(text_task_id_, {}));
}

}  // namespace troupe::api::detail
