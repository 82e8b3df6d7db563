#pragma once
// Where one request's events go: the callbacks of a request_sink (the
// embedding API and the HTTP sessions) or a caller-provided CAF actor that
// handles accepted_event, delta_event, finished_event and error_event.

#include <caf/actor.hpp>
#include <memory>

#include "troupe/engine.hpp"

namespace troupe {

class event_sink {
 public:
  event_sink() = default;
  /// Delivers by calling `callbacks` on the sending actor's thread.
  static event_sink from_callbacks(std::shared_ptr<request_sink> callbacks);
  /// Delivers as messages to `actor`.
  static event_sink from_actor(caf::actor actor);

  void accepted(const accepted_event& event) const;
  void delta(const delta_event& event) const;
  void finished(const finished_event& event) const;
  void error(const error_event& event) const;

  explicit operator bool() const { return callbacks_ != nullptr || actor_ != nullptr; }

 private:
  std::shared_ptr<request_sink> callbacks_;
  caf::actor actor_;
};

}  // namespace troupe
