#pragma once
// Loading the draft side of an engine for speculative decoding: a second
// execution stream (its own backend: its own CPU threads, or its own CUDA
// stream) running a draft checkpoint or the target's own weights with layers
// skipped, over a KV cache with the target's block count and block size.

#include <memory>

#include "actors/executor_actor.hpp"
#include "model/text/tokenizer.hpp"
#include "troupe/engine.hpp"

namespace troupe {

/// The drafter's executor resources for `config.speculative` draft or
/// layerskip; null for off and ngram (which need no model). `target` is the
/// target's, already loaded; `num_blocks` its device KV pool size;
/// `target_tokenizer` the target's tokenizer, which a draft's tokenizer
/// files (when it has any) must match. Throws std::runtime_error naming the
/// knob, file or field at fault (an unknown method, a draft without a
/// directory, a vocab_size or tokenizer unlike the target's, a bad layer
/// list, draft slots without a proposer or the reverse).
std::shared_ptr<executor_resources> load_drafter(const engine_config& config, const executor_resources& target,
                                                 std::int64_t num_blocks, const text::tokenizer& target_tokenizer);

}  // namespace troupe
