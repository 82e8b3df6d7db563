#pragma once
// A request's timeout, dropped from the actor clock once its answer is in.
// CAF 0.17 files every request's timeout in the actor system's clock and
// nothing in CAF takes it out when the answer arrives: the entry (about 180
// bytes, and a strong reference to the requester) stays until it is due.
// The scheduler sends several requests a step, the step's own with
// step_timeout (600 s by default), so the clock held every step of the last
// ten minutes, memory growing with the step rate (the soak's resident
// memory rose 1-2 MiB per 1,000 requests). So steps go to the executor
// with no CAF timeout (the scheduler actor times the oldest step in flight
// itself: arm_hang_check), and the response handlers of the other requests
// with long timeouts (a draft round, a prompt's encoding) call
// release_reply_timeout first. A release is a message to the clock's
// thread, which costs about what filing the timeout did (troupe
// bench-actors), so the KV plans and event batches, whose 10 s timeouts
// leave at most 10 s of entries, are not released. Internal to actors/
// (CAF types).

#include <caf/actor_clock.hpp>
#include <caf/local_actor.hpp>
#include <caf/message_id.hpp>

namespace troupe {

/// Drops from `self`'s clock the timeout of its request answered by
/// `reply` (the request's response_handle::id()). After a timeout fired
/// there is nothing to drop, and this does nothing.
inline void release_reply_timeout(caf::local_actor* self, caf::message_id reply) {
  self->clock().cancel_request_timeout(self, reply);
}

}  // namespace troupe
