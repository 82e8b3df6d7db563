// Fuzzes the Jinja chat-template engine: parsing a hostile template and
// rendering it with a hostile context, under tight render limits (the limits
// are part of what is tested: nothing may run away in time or memory).
// Input: the template, a NUL, then the context as a JSON object; without a
// NUL the template renders with a fixed conversation. Only
// chat_template_error may escape.

#include <boost/json/parse.hpp>
#include <cstddef>
#include <cstdint>

#include "fuzz_input.hpp"
#include "model/chat/chat_template.hpp"

namespace {

boost::json::object default_context() {
  troupe::chat_template_inputs inputs;
  inputs.messages = boost::json::parse(R"([{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
        "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"c\": 12}"}])")
                        .as_array();
  inputs.tools = boost::json::parse(R"([{"type": "function", "function": {"name": "weather",
      "description": "Current weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])")
                     .as_array();
  inputs.add_generation_prompt = true;
  inputs.special_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  return troupe::make_chat_context(inputs);
}

troupe::chat_render_options tight_limits() {
  troupe::chat_render_options options;
  options.limits.max_steps = 200'000;
  options.limits.max_loop_iterations = 20'000;
  options.limits.max_output_bytes = 1u << 20;
  options.limits.max_collection_items = 1u << 14;
  options.now = std::tm{};
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const boost::json::object fixed_context = default_context();
  static const troupe::chat_render_options options = tight_limits();
  const auto [source, context_text] = troupe::fuzz::split_at_nul(troupe::fuzz::as_text(data, size));
  boost::json::object context = fixed_context;
  if (!context_text.empty()) {
    boost::system::error_code error;
    boost::json::value parsed = boost::json::parse(context_text, error);
    if (error || !parsed.is_object()) return 0;
    context = std::move(parsed.as_object());
  }
  try {
    (void)troupe::chat_template::compile(std::string(source)).render(context, options);
  } catch (const troupe::chat_template_error&) {
    // refused or failed as Python's jinja2 would
  }
  return 0;
}
