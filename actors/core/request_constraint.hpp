#pragma once
// Compiling a request's structured-output constraint at encode time (the
// tokenizer actors share one constraint_compiler built from the tokenizer's
// vocabulary). An invalid or hostile constraint becomes the request's
// error_event: a 400 naming the field it came from.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "constraints/constraint.hpp"
#include "model/text/tokenizer.hpp"
#include "troupe/request.hpp"

namespace troupe {

/// The compiler of `tok`'s vocabulary (exact bytes per id) where `eos_ids`
/// end a document.
std::shared_ptr<constraints::constraint_compiler> make_constraint_compiler(const text::tokenizer& tok,
                                                                           const std::vector<std::int32_t>& eos_ids);

/// What compiling a request's constraint gave.
struct compiled_request_constraint {
  std::shared_ptr<const constraints::compiled_constraint> constraint;  ///< null: unconstrained (or an error)
  std::int32_t vocab = 0;                                              ///< ids its masks cover
  std::optional<error_event> error;                                    ///< invalid_request naming the field
};

/// Compiles `request.constraint` with `compiler` (null: structured output
/// is unavailable, an error for a constrained request).
compiled_request_constraint compile_request_constraint(constraints::constraint_compiler* compiler,
                                                       const generation_request& request);

}  // namespace troupe
