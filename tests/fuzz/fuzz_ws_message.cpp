// Fuzzes the WebSocket protocol's client frames (generate / cancel / ping)
// and the server frames rendered from what they carry: an error frame for
// a bad frame, a pong echoing ping data. Only ws_message_error may escape.

#include <cstddef>
#include <cstdint>

#include "api/http/ws_protocol.hpp"
#include "fuzz_input.hpp"

namespace {

struct fixture {
  troupe::api::request_limits limits;
  troupe::model_info model;
  fixture() {
    model.served_model_name = "m";
    model.vocab_size = 1000;
    model.max_model_len = 2048;
    limits.engine.vocab_size = model.vocab_size;
    limits.engine.max_model_len = model.max_model_len;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fixture f;
  using namespace troupe::api;
  try {
    const ws_client_message message = parse_ws_message(troupe::fuzz::as_text(data, size), f.limits, f.model);
    if (message.type == ws_client_message::kind::ping) (void)ws_pong_frame(message.ping_data);
  } catch (const ws_message_error& error) {
    (void)ws_error_frame(error.id, error);
  }
  return 0;
}
