#pragma once
// Who may use the /admin endpoints: with an admin token, whoever presents it
// (`Authorization: Bearer <token>`, or `?token=` on the WebSocket, which a
// browser cannot give headers); without one, loopback clients only. API keys
// never open them. Beast-free.

#include <string>
#include <string_view>
#include <vector>

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

/// The entries of a comma-separated origin list ("https://a.example, *"),
/// trimmed, empty ones dropped.
std::vector<std::string> parse_origin_list(std::string_view list);

/// True when `origin` (an Origin header: scheme://host[:port]) names the
/// server the Host header `host` names: same host and port, a scheme's
/// default port (http 80, https 443) written or not. Case-insensitive.
bool same_origin(std::string_view origin, std::string_view host);

/// Throws api_error 403 when a browser page of another origin sent
/// `request`: its Origin header is set (browsers set it on cross-origin
/// requests and WebSocket handshakes) and names neither this server nor an
/// entry of `allowed_origins` ("*": any). Requests without Origin (curl,
/// SDKs) pass; so does the server's own console.
void check_request_origin(const http_request_view& request, const std::vector<std::string>& allowed_origins);

/// Who is calling ("admin_token@<address>" or "loopback@<address>"), for the
/// audit log. Checks the origin first (check_request_origin). Throws
/// api_error 401 (token missing or wrong) or 403 (a cross-origin page; or no
/// token configured and the client is not on loopback, or the Host header
/// names something other than loopback — a DNS-rebinding page's own name).
std::string authorize_admin(const http_request_view& request, std::string_view admin_token,
                            const std::vector<std::string>& allowed_origins);

}  // namespace troupe::api
