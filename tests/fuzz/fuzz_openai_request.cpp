// Fuzzes the whole outside path of an OpenAI request body: JSON parsing,
// completions or chat validation (messages, tools, tool_choice,
// response_format, sampling fields), admission checks, chat-template
// rendering and tokenization with the demo model's tokenizer. The first byte
// picks the endpoint; the rest is the body. Any exception other than the
// documented api_error / rendering errors is a bug.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "actors/core/admission.hpp"
#include "actors/core/prompt_preparer.hpp"
#include "api/http/api_error.hpp"
#include "api/http/json_fields.hpp"
#include "api/http/openai_request.hpp"
#include "fuzz_input.hpp"

namespace {

using namespace troupe;

struct fixture {
  api::request_limits limits;
  model_info model;
  std::shared_ptr<const prompt_preparer> demo;           ///< the demo model's template
  std::shared_ptr<const prompt_preparer> tool_template;  ///< Llama 3.1's, which renders tools and tool calls

  fixture() {
    model.served_model_name = "m";
    model.vocab_size = 0;
    model.max_model_len = 2048;
    demo = prompt_preparer::load(std::string(TROUPE_SOURCE_DIR) + "/model/demo/troupe-demo-en");
    model.vocab_size = demo->tokenizer()->vocab_size();
    limits.engine.vocab_size = model.vocab_size;
    limits.engine.max_model_len = model.max_model_len;
    chat_template_source llama;
    llama.templates["default"] = fuzz::read_fixture("chat/templates/meta-llama-Llama-3.1-8B-Instruct.jinja");
    llama.special_tokens = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}};
    tool_template = std::make_shared<const prompt_preparer>(demo->tokenizer(), std::move(llama));
  }
};

void admit(const api::parsed_generation& parsed, const fixture& f) {
  const auto sequences = static_cast<std::int64_t>(parsed.prompts.size()) * parsed.n;
  for (const generation_request& request : parsed.prompts) {
    if (check_request(request, f.limits.engine)) return;
    if (check_output_budget(sequences, request.max_tokens, f.limits.engine)) return;
    for (const prompt_preparer* preparer : {f.demo.get(), f.tool_template.get()}) {
      const prepared_prompt_result prepared = preparer->prepare(request);
      if (!prepared.error) (void)check_prompt_length(prepared.ids.size(), request, f.limits.engine);
    }
  }
}

const fixture* fixture_ptr = nullptr;

}  // namespace

// The demo tokenizer loads here, outside libFuzzer's per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture_ptr = new fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fixture& f = *fixture_ptr;
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  const std::string_view body = troupe::fuzz::as_text(data + 1, size - 1);
  try {
    const boost::json::object object = troupe::api::parse_json_object(body);
    const troupe::api::parsed_generation parsed =
        chat ? troupe::api::parse_chat_request(object, f.limits, f.model)
             : troupe::api::parse_completions_request(object, f.limits, f.model);
    admit(parsed, f);
  } catch (const troupe::api::api_error&) {
    // a 4xx answer: the expected outcome for most inputs
  }
  return 0;
}
