#pragma once
// The WebSocket options both server WebSockets (/v1/ws and /admin/stream)
// set before their handshake. Included by those two sessions only.

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <string>

#include "api/http/http_server.hpp"

namespace troupe::api::detail {

/// Hands the socket's timing to the WebSocket: handshake within
/// read_timeout, pinged when idle for idle_timeout; the handshake response
/// names the server and echoes `request_id`.
inline void set_websocket_options(boost::beast::websocket::stream<boost::beast::tcp_stream>& ws,
                                  const server_config& config, const std::string& request_id) {
  namespace websocket = boost::beast::websocket;
  boost::beast::get_lowest_layer(ws).expires_never();  // the websocket's own timeouts take over
  websocket::stream_base::timeout timeouts{};
  timeouts.handshake_timeout = config.read_timeout;
  timeouts.idle_timeout = config.idle_timeout;
  timeouts.keep_alive_pings = true;
  ws.set_option(timeouts);
  ws.set_option(websocket::stream_base::decorator([request_id](websocket::response_type& response) {
    response.set(boost::beast::http::field::server, "troupe");
    response.set("X-Request-Id", request_id);
  }));
}

}  // namespace troupe::api::detail
