// Fuzzes the PATCH /admin/config body: JSON parsing and validation against
// the knob registry (live knobs, types, ranges, choices). Only api_error
// (a 400 naming the field) may escape.

#include <cstddef>
#include <cstdint>

#include "api/http/admin.hpp"
#include "api/http/api_error.hpp"
#include "api/http/json_fields.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)troupe::api::parse_settings_change(troupe::api::parse_json_object(troupe::fuzz::as_text(data, size)));
  } catch (const troupe::api::api_error&) {
    // a 400: the expected outcome for most inputs
  }
  return 0;
}
