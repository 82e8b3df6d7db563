#include "memory/kv_protocol.hpp"

namespace troupe {

const char* kv_refusal_name(kv_refusal why) {
  switch (why) {
    case kv_refusal::no_device_blocks:
      return "no_device_blocks";
    case kv_refusal::no_host_blocks:
      return "no_host_blocks";
    case kv_refusal::unknown_sequence:
      return "unknown_sequence";
    case kv_refusal::invalid:
      return "invalid";
  }
  return "unknown";
}

}  // namespace troupe
