#pragma once
// One HTTP/1.1 connection: keep-alive requests, read limits and timeouts,
// plain replies, SSE streams and the hand-over to a WebSocket session
// (http_session.cpp), and the engine work a request starts, a generation
// or a /tokenize call, with its cancel when the client leaves meanwhile
// (http_session_work.cpp). Everything runs on the connection's strand;
// handlers come in do_/on_ pairs. Beast: included by those two files only.

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <memory>
#include <optional>
#include <string>

#include "api/http/disconnect_watch.hpp"
#include "api/http/server_internal.hpp"

namespace troupe::api::detail {

class http_session final : public closable,
                           public job_listener,
                           public guarded_session<http_session>,
                           public std::enable_shared_from_this<http_session> {
 public:
  /// `on_admin_port`: accepted by the separate admin listener.
  http_session(tcp::socket&& socket, std::shared_ptr<server_state> state, bool on_admin_port);

  /// Starts serving (refuses the connection when over max_connections).
  void run();
  void close() override;

  void job_reply(generation_job&, http_reply reply) override;
  void job_stream_started(generation_job&) override;
  void job_frames_queued(generation_job&) override;
  void job_finished(generation_job&) override;

  /// A handler of this connection threw (guarded()): it is closed; the
  /// other connections on its I/O thread go on.
  void on_handler_exception(std::exception_ptr error) noexcept;

 private:
  // --- reading a request (http_session.cpp) ---------------------------------
  void on_start();
  void do_read();
  void on_first_bytes(beast::error_code ec, std::size_t bytes);
  void do_read_header();
  void on_read_header(beast::error_code ec, std::size_t);
  void do_read_body();
  void on_read_failed(beast::error_code ec);
  void on_read(beast::error_code ec, std::size_t);
  void refuse_upgrade_body();
  void upgrade(beast::http::request<beast::http::string_body> request, const http_request_view& view);
  void upgrade_admin_stream(beast::http::request<beast::http::string_body> request, const http_request_view& view);

  // --- engine work (http_session_work.cpp) -----------------------------------
  void do_route(http_request_view view);
  void on_routed(routed_request routed);
  void do_text_task(text_task task);
  void on_text_task_queued(const std::string& id);
  void on_text_task(const text_task& task, const text_task_result& result);
  void do_watch_disconnect();
  void cancel_work();

  // --- replies and SSE (http_session.cpp) --------------------------------------
  void do_write_reply(http_reply reply);
  void on_write_reply(beast::error_code ec, bool keep_alive);
  void do_linger();
  void on_linger(beast::error_code ec, std::size_t);
  void do_write_stream_header();
  void on_write_stream_header(beast::error_code ec, std::size_t);
  void do_write_frames();
  void on_write_frames(beast::error_code ec, std::size_t);
  void do_write_last_chunk();
  void on_write_last_chunk(beast::error_code ec, std::size_t);
  void finish_response();
  /// Ends the connection: closes it and cancels the engine work in flight.
  void abandon() noexcept;

  beast::tcp_stream stream_;
  std::shared_ptr<server_state> state_;
  bool on_admin_port_;
  std::uint64_t origin_;  ///< this connection's engine origin: its prompts share one bound
  std::optional<connection_slot> slot_;
  beast::flat_buffer buffer_;
  std::optional<beast::http::request_parser<beast::http::string_body>> parser_;
  std::string request_id_;
  bool keep_alive_ = true;
  bool counted_response_ = false;
  bool closed_ = false;
  std::shared_ptr<generation_job> job_;
  std::shared_ptr<outgoing_queue> queue_;
  bool job_done_ = false;
  /// The engine's id of the text task it holds for this request ("" none):
  /// cancelled when the client leaves before the answer.
  std::string text_task_id_;
  std::string answered_text_task_id_;  ///< the last text task answered (its queued notice may come after)
  std::optional<beast::http::response<beast::http::empty_body>> stream_header_;
  std::optional<beast::http::response_serializer<beast::http::empty_body>> stream_serializer_;
  std::string write_data_;
  bool writing_ = false;
  bool streaming_ = false;
  disconnect_watch watch_;
};

}  // namespace troupe::api::detail
