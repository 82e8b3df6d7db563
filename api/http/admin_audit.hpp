#pragma once
// The admin audit trail: who changed what, when, from what to what. Bounded
// (the oldest entries go first), thread-safe, and every entry is also
// written to the server log.

#include <boost/json/array.hpp>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace troupe::api {

/// One recorded action.
struct audit_entry {
  std::uint64_t seq = 0;  ///< 1, 2, ... in order of recording
  double time_s = 0;      ///< unix time, seconds
  std::string who;        ///< "admin_token@<address>" or "loopback@<address>"
  std::string action;     ///< config, abort, priority, save
  std::string target;     ///< the knob, request id or file
  std::string from;       ///< value before (empty when not applicable)
  std::string to;         ///< value after
};

/// See the file comment.
class audit_log {
 public:
  /// Keeps at most `capacity` entries (at least 1).
  explicit audit_log(std::size_t capacity);

  /// Records an entry stamped with the current time and logs it.
  void record(std::string who, std::string action, std::string target, std::string from, std::string to);
  /// The entries with seq > `after`, oldest first, as JSON objects.
  boost::json::array to_json(std::uint64_t after = 0) const;
  /// Entries held now.
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::uint64_t next_seq_ = 1;
  std::deque<audit_entry> entries_;
};

}  // namespace troupe::api
