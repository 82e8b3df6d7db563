#include "actors/event_sink.hpp"

#include <spdlog/spdlog.h>

#include "actors/messages.hpp"

namespace troupe {

namespace {

// A sink that throws must not take the sending actor down with it: the
// request it belongs to is the only one affected.
template <class Event, class Member>
void call_guarded(const std::shared_ptr<request_sink>& sink, Member member, const Event& event) {
  try {
    ((*sink).*member)(event);
  } catch (const std::exception& e) {
    spdlog::warn("request {}: sink threw: {}", event.request_id, e.what());
  }
}

}  // namespace

event_sink event_sink::from_callbacks(std::shared_ptr<request_sink> callbacks) {
  event_sink sink;
  sink.callbacks_ = std::move(callbacks);
  return sink;
}

event_sink event_sink::from_actor(caf::actor actor) {
  event_sink sink;
  sink.actor_ = std::move(actor);
  return sink;
}

void event_sink::accepted(const accepted_event& event) const {
  if (callbacks_) call_guarded(callbacks_, &request_sink::on_accepted, event);
  if (actor_) caf::anon_send(actor_, event);
}

void event_sink::delta(const delta_event& event) const {
  if (callbacks_) call_guarded(callbacks_, &request_sink::on_delta, event);
  if (actor_) caf::anon_send(actor_, event);
}

void event_sink::finished(const finished_event& event) const {
  if (callbacks_) call_guarded(callbacks_, &request_sink::on_finished, event);
  if (actor_) caf::anon_send(actor_, event);
}

void event_sink::error(const error_event& event) const {
  if (callbacks_) call_guarded(callbacks_, &request_sink::on_error, event);
  if (actor_) caf::anon_send(actor_, event);
}

}  // namespace troupe
