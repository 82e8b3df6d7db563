// CAF 0.17 files a request's timeout in the actor clock, with a strong
// reference to the requester, and keeps it until it is due, answered or
// not (only an actor that quits has its entries dropped). The engine's
// actors live as long as the engine and send requests every step, the
// step's with step_timeout (600 s): the clock held every step of the last
// ten minutes. release_reply_timeout drops an answered request's entry
// (actors/reply_timeout.hpp; every response handler in actors/ calls it).
// The entries are counted by the strong references they hold.

#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <chrono>
#include <thread>

#include "actors/reply_timeout.hpp"

namespace troupe {
namespace {

using namespace std::chrono_literals;

// Takes an argument: CAF 0.17, spawning a function without one, binds a
// reference to an empty argument pack through a null pointer (UBSan says so).
caf::behavior adder(caf::event_based_actor*, int step) {
  return {[step](int x) { return x + step; }};
}

/// Strong references to a long-lived requester once it has had `requests`
/// answers (an hour's timeout each), beyond those it had before, after the
/// clock has had up to `settle` to drop them.
std::size_t references_left_by(int requests, bool release, std::chrono::milliseconds settle) {
  caf::actor_system_config config;
  caf::actor_system system{config};
  const caf::actor responder = system.spawn(adder, 1);
  caf::scoped_actor self{system};
  const std::size_t before = self->ctrl()->strong_refs.load();
  for (int i = 0; i < requests; ++i) {
    auto asked = self->request(responder, std::chrono::seconds(3600), i);
    asked.receive(
        [&](int answer) {
          EXPECT_EQ(answer, i + 1);
          if (release) release_reply_timeout(self.ptr(), asked.id());
        },
        [](caf::error& error) { ADD_FAILURE() << caf::to_string(error); });
  }
  const auto deadline = std::chrono::steady_clock::now() + settle;
  while (self->ctrl()->strong_refs.load() > before && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  const std::size_t left = self->ctrl()->strong_refs.load() - before;
  caf::anon_send_exit(responder, caf::exit_reason::user_shutdown);
  return left;
}

TEST(ReplyTimeout, ReleasedTimeoutsLeaveTheClock) { EXPECT_EQ(references_left_by(200, true, 5s), 0u); }

// The reason for the releases: without them every answered request stays
// in the clock. Should a CAF release drop them itself, this fails and the
// releases can go.
TEST(ReplyTimeout, WithoutTheReleaseEveryAnsweredRequestStaysInTheClock) {
  EXPECT_GE(references_left_by(200, false, 500ms), 200u);
}

}  // namespace
}  // namespace troupe
