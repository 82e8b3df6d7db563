#include "api/http/admin_audit.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json/object.hpp>
#include <chrono>

namespace troupe::api {

audit_log::audit_log(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

void audit_log::record(std::string who, std::string action, std::string target, std::string from, std::string to) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  spdlog::info("admin audit: {} {} {} from '{}' to '{}'", who, action, target, from, to);
  const std::lock_guard lock(mutex_);
  entries_.push_back(
      {next_seq_++, now, std::move(who), std::move(action), std::move(target), std::move(from), std::move(to)});
  while (entries_.size() > capacity_) entries_.pop_front();
}

boost::json::array audit_log::to_json(std::uint64_t after) const {
  boost::json::array out;
  const std::lock_guard lock(mutex_);
  for (const audit_entry& entry : entries_) {
    if (entry.seq <= after) continue;
    out.push_back(boost::json::object{{"seq", entry.seq},
                                      {"time", entry.time_s},
                                      {"who", entry.who},
                                      {"action", entry.action},
                                      {"target", entry.target},
                                      {"from", entry.from},
                                      {"to", entry.to}});
  }
  return out;
}

std::size_t audit_log::size() const {
  const std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace troupe::api
