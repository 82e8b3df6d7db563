#include "actors/core/request_constraint.hpp"

#include "model/text/token_bytes.hpp"

namespace troupe {

std::shared_ptr<constraints::constraint_compiler> make_constraint_compiler(const text::tokenizer& tok,
                                                                           const std::vector<std::int32_t>& eos_ids) {
  constraints::vocabulary vocab;
  vocab.token_bytes = text::vocabulary_bytes(tok);
  vocab.eos_tokens = eos_ids;
  return std::make_shared<constraints::constraint_compiler>(std::move(vocab));
}

compiled_request_constraint compile_request_constraint(constraints::constraint_compiler* compiler,
                                                       const generation_request& request) {
  compiled_request_constraint out;
  if (!request.constraint) return out;
  const std::string field = request.constraint_field.empty() ? "response_format" : request.constraint_field;
  if (compiler == nullptr) {
    out.error = error_event{request.request_id, error_kind::invalid_request,
                            "structured output is not available for this model", field};
    return out;
  }
  try {
    out.constraint = compiler->compile(*request.constraint);
    out.vocab = static_cast<std::int32_t>(compiler->vocab_size());
  } catch (const constraints::constraint_error& e) {
    out.error = error_event{request.request_id, error_kind::invalid_request, e.what(), field};
  }
  return out;
}

}  // namespace troupe
