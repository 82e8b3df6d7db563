#pragma once
// The reference for engine tests: each request generated alone by the batch
// runner over the same checkpoint, with batch-invariant CPU numerics, so an
// engine configured the same way (its block size too: attention folds the
// context one KV block at a time, so another block size rounds differently)
// must give the same tokens.

#include <vector>

#include "kernels/backend.hpp"
#include "model/batch_runner.hpp"
#include "model/checkpoint.hpp"
#include "model/llama_model.hpp"

namespace troupe::testing {

class solo_reference {
 public:
  /// `quantization`: the linear layers' format at load (the LM head by
  /// llama_model's auto rule, as the engine's); `block_size`: the engine's, tokens per KV block.
  explicit solo_reference(const checkpoint& ckpt, weight_quantization quantization = weight_quantization::none,
                          int block_size = runner_options{}.block_size)
      : device_(make_cpu_backend()),
        model_(ckpt.config(), ckpt.weights(), *device_, quantization),
        runner_(model_, {.block_size = block_size}) {
    for (auto id : ckpt.generation().eos_token_ids) eos_.push_back(static_cast<std::int32_t>(id));
  }

  /// The tokens `request` generates alone; its stop ids become the checkpoint's eos ids.
  std::vector<std::int32_t> generate(runner_request request) {
    request.stop_token_ids = eos_;
    return runner_.generate({request})[0].tokens;
  }

 private:
  static std::unique_ptr<backend> make_cpu_backend() {
    backend_options options;
    options.threads = 2;
    options.batch_invariant = true;
    return make_backend("cpu", options);
  }

  std::unique_ptr<backend> device_;
  llama_model model_;
  batch_runner runner_;
  std::vector<std::int32_t> eos_;
};

}  // namespace troupe::testing
