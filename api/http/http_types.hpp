#pragma once
// Plain request/response types the routes and generation jobs work with, so
// only the Beast sessions see Beast types.

#include <string>
#include <vector>

namespace troupe::api {

/// One extra response header (for example Retry-After or Allow).
struct header_field {
  std::string name;
  std::string value;
};

/// An HTTP request as the routes see it (already size-checked by the session).
struct http_request_view {
  std::string method;          ///< "GET", "POST", ...
  std::string path;            ///< request target without the query string
  std::string query;           ///< text after '?', not decoded; empty when absent
  std::string body;            ///< raw body bytes
  std::string authorization;   ///< the Authorization header, empty when absent
  std::string request_id;      ///< the X-Request-Id the response will echo
  std::string remote_address;  ///< the client's IP address (textual), empty when unknown
  std::string host;            ///< the Host header, empty when absent
  std::string origin;          ///< the Origin header (set by browsers), empty when absent
  bool on_admin_port = false;  ///< arrived on the separate admin listener (knob admin_port)
};

/// A complete, non-streaming HTTP response.
struct http_reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<header_field> headers;  ///< added after the standard ones
};

}  // namespace troupe::api
