#include "api/http/admin_access.hpp"

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

}  // namespace

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

std::string authorize_admin(const http_request_view& request, std::string_view admin_token) {
  const std::string address = request.remote_address.empty() ? "unknown" : request.remote_address;
  if (admin_token.empty()) {
    if (!is_loopback_address(request.remote_address)) {
      throw api_error(403, "permission_error",
                      "the admin endpoints answer loopback clients only unless the server has an admin token", {},
                      "admin_loopback_only");
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
