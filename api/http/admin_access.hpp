#pragma once
// Who may use the /admin endpoints: with an admin token, whoever presents it
// (`Authorization: Bearer <token>`, or `?token=` on the WebSocket, which a
// browser cannot give headers); without one, loopback clients only. API keys
// never open them. Beast-free.

#include <string>
#include <string_view>

#include "api/http/http_types.hpp"

namespace troupe::api {

/// True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x addresses (textual form).
bool is_loopback_address(std::string_view address);

/// True when `host` (a listen address) accepts only loopback clients.
bool is_loopback_host(std::string_view host);

/// Constant-time comparison: the time taken does not reveal how much of `expected` matched.
bool same_secret(std::string_view given, std::string_view expected);

/// Empty when the server may start, else why not: admin enabled on a
/// non-loopback host without an admin token.
std::string admin_startup_problem(std::string_view host, bool admin_enabled, std::string_view admin_token);

/// Who is calling ("admin_token@<address>" or "loopback@<address>"), for the
/// audit log. Throws api_error 401 (token missing or wrong) or 403 (no token
/// configured and the client is not on loopback).
std::string authorize_admin(const http_request_view& request, std::string_view admin_token);

}  // namespace troupe::api
