#pragma once
// One OpenAI generation request in flight: submits one engine request per
// prompt, receives their events on the connection's strand, merges choice
// indexes (prompt p, choice c → index p·n + c) and answers as one JSON
// response, an SSE stream or WebSocket frames. No sockets here: the owning
// session implements job_listener and drains the outgoing queue.

#include <atomic>
#include <boost/json/value.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "api/http/api_error.hpp"
#include "api/http/outgoing_queue.hpp"
#include "api/http/response_render.hpp"
#include "model/chat/tool_calls.hpp"
#include "troupe/engine.hpp"

namespace troupe::api {

class generation_job;

/// How a job answers.
enum class output_mode : std::uint8_t {
  aggregate,  ///< one JSON response once every choice finished
  sse,        ///< Server-Sent Events chunks on one HTTP response
  websocket,  ///< delta / done / error frames on a shared WebSocket
};

/// The owning connection; called on its strand.
class job_listener {
 public:
  virtual ~job_listener() = default;
  /// The complete reply: aggregate mode, or an error before an SSE stream started.
  virtual void job_reply(generation_job& job, http_reply reply) = 0;
  /// SSE: every prompt was accepted; send the response headers now.
  virtual void job_stream_started(generation_job& job) = 0;
  /// Frames were added to the outgoing queue.
  virtual void job_frames_queued(generation_job& job) = 0;
  /// The job will produce nothing more; its last frames are queued.
  virtual void job_finished(generation_job& job) = 0;
};

/// Runs a function on the connection's strand later (never inline); drops it
/// once the server has stopped. Called from engine threads.
using strand_post = std::function<void(std::function<void()>)>;

/// Engine requests in flight across the server, for drain and leak checks.
using in_flight_counter = std::shared_ptr<std::atomic<std::int64_t>>;

/// Where and how a job delivers its output.
struct job_options {
  output_mode mode = output_mode::aggregate;
  std::uint64_t stream_key = 0;  ///< the job's stream in the outgoing queue
  boost::json::value client_id;  ///< websocket: the client's id, echoed in frames
  /// sse and websocket modes. Weak: queued deltas hold the job, and a
  /// connection that drops its queue must not be kept alive by it.
  std::weak_ptr<outgoing_queue> queue;
  std::shared_ptr<job_listener> listener;  ///< released when the job finishes or is cancelled
  in_flight_counter in_flight;             ///< may be null
  std::uint64_t origin = 0;                ///< the connection's, set on every engine request (0: none)
};

/// See the file comment. Every member function runs on the owner's strand.
class generation_job final : public delta_renderer, public std::enable_shared_from_this<generation_job> {
 public:
  generation_job(parsed_generation request, job_options options);
  ~generation_job() override;
  generation_job(const generation_job&) = delete;
  generation_job& operator=(const generation_job&) = delete;

  /// Submits every prompt to `engine` (which must outlive the job); events
  /// come back through `post`.
  void start(engine& engine, strand_post post);
  /// Detaches: cancels the engine requests still running and reports
  /// nothing more (the client is gone).
  void cancel();
  /// Asks the engine to stop early while staying attached: the choices then
  /// finish with reason "abort" and are reported as usual.
  void cancel_in_engine();

  bool finished() const { return finished_; }
  std::uint64_t stream_key() const { return options_.stream_key; }
  const boost::json::value& client_id() const { return options_.client_id; }
  const std::string& response_id() const { return builder_.identity().id; }
  /// The engine request ids, one per prompt (after start).
  const std::vector<std::string>& engine_request_ids() const { return engine_ids_; }

  std::string render_delta(const pending_delta& delta) override;

 private:
  struct prompt_state {
    bool accepted = false;  ///< accepted, or already produced output
    bool running = false;   ///< counted in flight; the engine may still send events
    std::string prompt_text;
    usage_info usage;
  };
  struct choice_state {
    std::string text;
    std::optional<tool_call_parser> parser;  ///< streamed chat with tools: reads calls as text arrives
    std::vector<rendered_tool_call> calls;   ///< streamed: the calls sent so far
    std::vector<token_logprobs> logprobs;
    std::optional<finish_reason> reason;
    std::optional<std::string> stop_reason;
    std::size_t text_offset = 0;  ///< completions logprobs: offset of the next token's text
  };
  using early_event = std::pair<std::size_t, std::variant<delta_event, finished_event>>;

  std::shared_ptr<request_sink> make_sink(std::size_t prompt, const strand_post& post);
  void handle_accepted(std::size_t prompt, const accepted_event& event);
  void handle_delta(std::size_t prompt, delta_event event);
  void handle_finished(std::size_t prompt, const finished_event& event);
  void handle_error(std::size_t prompt, const error_event& event);
  void maybe_start_stream();
  void complete();
  void fail(const api_error& error);
  void end(bool notify);
  void release_prompt(std::size_t prompt);
  /// Streams what the choice's tool-call parser made of new text: content
  /// as mergeable deltas (the first carries `event`'s tokens and logprobs),
  /// calls as tool_calls chunks.
  void stream_parsed(int index, std::vector<tool_call_event> parsed, delta_event event);
  void stream_tool_call(int index, const tool_call_event& call);
  /// The complete response's choice `i`, tool calls parsed out of its text.
  choice_result finished_choice(std::size_t i);
  void push_frame(int choice, const boost::json::value& chunk);
  /// Appends ready bytes to the connection's queue (dropped once it is gone).
  void push_bytes(int choice, std::string bytes);
  std::string frame(const boost::json::value& chunk) const;
  void notify_frames();
  int choice_index(std::size_t prompt, int choice) const;

  parsed_generation request_;
  job_options options_;
  chunk_builder builder_;
  engine* engine_ = nullptr;
  std::vector<std::string> engine_ids_;
  std::vector<prompt_state> prompts_;
  std::vector<choice_state> choices_;
  std::vector<early_event> early_events_;  ///< streamed events before every prompt was accepted
  bool started_ = false;
  bool finished_ = false;
};

}  // namespace troupe::api
