#include "api/http/admin_access.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "api/http/api_error.hpp"

namespace troupe::api {

namespace {

/// The value of `name` in a query string ("a=1&token=x"), undecoded; empty when absent.
std::string_view query_value(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const std::size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    if (pair.size() > name.size() && pair.starts_with(name) && pair[name.size()] == '=')
      return pair.substr(name.size() + 1);
    if (end == std::string_view::npos) break;
    query.remove_prefix(end + 1);
  }
  return {};
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

/// `authority` ("host:port", "[::1]:port" or "host") with `default_port`
/// (":80") removed, lowercased.
std::string without_default_port(std::string_view authority, std::string_view default_port) {
  if (authority.ends_with(default_port)) authority.remove_suffix(default_port.size());
  return lowercase(authority);
}

/// The host name of a Host header value, without port or IPv6 brackets.
std::string_view host_name_of(std::string_view host) {
  if (host.starts_with('[')) {
    const std::size_t close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(1, close - 1);
  }
  const std::size_t colon = host.find(':');
  return colon != std::string_view::npos && host.find(':', colon + 1) == std::string_view::npos ? host.substr(0, colon)
                                                                                                : host;
}

/// True for a dotted-quad IPv4 literal in 127.0.0.0/8 ("127.0.0.1", not "127.0.0.1.example").
bool is_loopback_ipv4_literal(std::string_view text) {
  std::vector<std::string_view> parts;
  for (std::size_t dot = 0; dot != std::string_view::npos; text.remove_prefix(dot + 1)) {
    dot = text.find('.');
    parts.push_back(text.substr(0, dot));
    if (dot == std::string_view::npos) break;
  }
  if (parts.size() != 4 || parts[0] != "127") return false;
  return std::all_of(parts.begin(), parts.end(), [](std::string_view part) {
    return !part.empty() && part.size() <= 3 && part.find_first_not_of("0123456789") == std::string_view::npos &&
           std::stoi(std::string(part)) <= 255;
  });
}

/// True when a Host header's name (lowercased, no port) names loopback.
bool host_name_is_loopback(std::string_view name) {
  return name == "localhost" || name == "::1" || is_loopback_ipv4_literal(name);
}

}  // namespace

std::vector<std::string> parse_origin_list(std::string_view list) {
  std::vector<std::string> origins;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view entry = trimmed(list.substr(0, comma));
    if (!entry.empty()) origins.emplace_back(entry);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return origins;
}

bool same_origin(std::string_view origin, std::string_view host) {
  const std::size_t separator = origin.find("://");
  if (separator == std::string_view::npos || host.empty()) return false;
  const std::string scheme = lowercase(origin.substr(0, separator));
  const std::string_view authority = origin.substr(separator + 3);
  const std::string_view default_port = scheme == "https" ? ":443" : scheme == "http" ? ":80" : "";
  if (default_port.empty()) return false;
  return without_default_port(authority, default_port) == without_default_port(host, default_port);
}

void check_request_origin(const http_request_view& request, const std::vector<std::string>& allowed_origins) {
  if (request.origin.empty() || same_origin(request.origin, request.host)) return;
  for (const std::string& allowed : allowed_origins) {
    if (allowed == "*" || lowercase(allowed) == lowercase(request.origin)) return;
  }
  throw api_error(403, "permission_error",
                  "requests from pages of origin '" + request.origin.substr(0, 256) +
                      "' are refused: only the server's own origin and --allowed-origins may call this endpoint",
                  {}, "cross_origin");
}

bool is_loopback_address(std::string_view address) {
  if (address.starts_with("::ffff:")) address.remove_prefix(7);
  return address == "::1" || address.starts_with("127.");
}

bool is_loopback_host(std::string_view host) { return host == "localhost" || is_loopback_address(host); }

bool same_secret(std::string_view given, std::string_view expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    difference |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  }
  return difference == 0;
}

std::string admin_startup_problem(std::string_view host, bool admin_enabled, std::string_view admin_token) {
  if (!admin_enabled || !admin_token.empty() || is_loopback_host(host)) return {};
  return "knob 'admin_token': the admin endpoints are enabled on non-loopback host '" + std::string(host) +
         "' without an admin token; set --admin-token or --no-admin";
}

std::string authorize_admin(const http_request_view& request, std::string_view admin_token,
                            const std::vector<std::string>& allowed_origins) {
  check_request_origin(request, allowed_origins);
  const std::string address = request.remote_address.empty() ? "unknown" : request.remote_address;
  if (admin_token.empty()) {
    if (!is_loopback_address(request.remote_address)) {
      throw api_error(403, "permission_error",
                      "the admin endpoints answer loopback clients only unless the server has an admin token", {},
                      "admin_loopback_only");
    }
    // A DNS-rebinding page reaches loopback under its own host name: without
    // a token, only requests addressed to a loopback name are the operator's.
    if (!request.host.empty() && !host_name_is_loopback(lowercase(host_name_of(request.host)))) {
      throw api_error(403, "permission_error",
                      "without an admin token the admin endpoints answer requests addressed to localhost or a "
                      "loopback address only (Host '" +
                          request.host.substr(0, 256) + "')",
                      {}, "admin_host_not_loopback");
    }
    return "loopback@" + address;
  }
  constexpr std::string_view bearer = "Bearer ";
  std::string_view given;
  if (request.authorization.starts_with(bearer)) {
    given = std::string_view(request.authorization).substr(bearer.size());
  } else {
    given = query_value(request.query, "token");
  }
  if (given.empty() || !same_secret(given, admin_token)) {
    throw api_error(401, "authentication_error",
                    "missing or incorrect admin token (send 'Authorization: Bearer <admin token>'; API keys do not "
                    "open /admin)",
                    {}, "invalid_admin_token");
  }
  return "admin_token@" + address;
}

}  // namespace troupe::api
