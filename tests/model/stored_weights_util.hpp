#pragma once
// Helpers of the tests of checkpoints stored quantised (GGUF 4-bit and
// K-quant files): a kept 4-bit matrix packed as the CPU backend packs it,
// the one prompt every such test runs through a model, and a file run as
// `auto` chooses against the file expanded.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cpu/quantized_weights.hpp"
#include "kernels/stored_code_source.hpp"
#include "model/batch_runner.hpp"
#include "model/checkpoint.hpp"
#include "model/llama_model.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe::testing {

/// Weight (row, col) of `tensor` (stored_codes set) as the CPU backend
/// packs it alone: with its block factors where the source has them.
class packed_weights {
 public:
  explicit packed_weights(const host_tensor& tensor) {
    const stored_code_source& source = *tensor.stored_codes;
    layout_ = cpu::layout_for(source.format(), tensor.shape[0], tensor.shape[1], source.has_block_factors());
    buffer_.assign(layout_.total_bytes, 0);
    cpu::pack_source_rows(source, 0, tensor.shape[0], layout_, buffer_.data(), 0);
  }
  /// True when the weights hold block factors (layout_for).
  bool block_factored() const { return layout_.block_factors; }
  float at(std::int64_t row, std::int64_t col) const {
    return cpu::dequantized_weight(cpu::view_of(layout_, buffer_.data()), row, col);
  }

 private:
  cpu::quantized_layout layout_;
  std::vector<std::uint8_t> buffer_;
};

/// The logits of a fixed 16-token prompt and its 8-token greedy continuation.
struct prompt_run {
  std::vector<float> logits;
  std::vector<std::int32_t> greedy;
  /// [steps][vocab]: the next-token logits after the prompt and the first
  /// `step` tokens of a continuation (run_fixed_prompt's `forced`, else
  /// `greedy`), all run as one prompt.
  std::vector<float> step_logits;
};

/// Runs the fixed prompt through `weights` on a 2-thread CPU backend with
/// linear layers in `format` and the LM head in `lm_head` (nullopt: the
/// model's default for `format`); step_logits follow `forced` when given.
inline prompt_run run_fixed_prompt(const checkpoint& weights, weight_quantization format,
                                   std::optional<weight_quantization> lm_head = std::nullopt,
                                   const std::vector<std::int32_t>& forced = {}) {
  backend_options options;
  options.threads = 2;
  const auto device = make_backend("cpu", options);
  llama_model model(weights.config(), weights.weights(), *device, format, lm_head);
  batch_runner runner(model, runner_options{});
  const std::vector<std::int32_t> prompt = {572, 293, 220, 426, 72, 66, 74, 276, 501, 289, 78, 87, 11, 220, 257, 299};
  prompt_run out;
  out.logits = runner.prompt_logits({prompt}, 512)[0];
  runner_request request;
  request.prompt = prompt;
  request.max_tokens = 8;
  request.params.temperature = 0.0;
  out.greedy = runner.generate({request})[0].tokens;
  const std::vector<std::int32_t>& continuation = forced.empty() ? out.greedy : forced;
  if (continuation.empty()) return out;
  std::vector<std::int32_t> context = prompt;
  context.insert(context.end(), continuation.begin(), continuation.end() - 1);
  const std::vector<float> all = runner.prompt_logits({context}, 512)[0];
  const std::size_t vocab = all.size() / context.size();
  out.step_logits.assign(all.end() - static_cast<std::ptrdiff_t>(continuation.size() * vocab), all.end());
  return out;
}

/// `file` under `auto` (int8 LM head) against the file expanded to bf16
/// (`none`): the largest logit difference over the largest logit, recorded
/// as a test property; `auto` must choose `expected`. Greedy choices are
/// compared at every step of the expanded file's continuation, both models
/// given the same context: they must agree except where the expanded
/// file's two candidates lie within that largest difference of each other
/// (a near tie, which either side may take); the free-running greedy
/// continuations must agree up to the first such step.
inline double error_against_expanded(const std::filesystem::path& file, weight_quantization expected) {
  const quantized_checkpoint native = open_for_quantization(file, "auto", true, {.show_progress = false});
  const quantized_checkpoint expanded = open_for_quantization(file, "none", true, {.show_progress = false});
  EXPECT_EQ(native.quantization, expected);
  EXPECT_EQ(expanded.quantization, weight_quantization::none);
  EXPECT_NE(expanded.weights.weights().layers[0].q_proj->data, nullptr);
  const prompt_run b = run_fixed_prompt(expanded.weights, expanded.quantization);
  const prompt_run a = run_fixed_prompt(native.weights, native.quantization, weight_quantization::int8, b.greedy);
  const double error = relative_max_error(a.logits, b.logits);
  ::testing::Test::RecordProperty("relative_error", std::to_string(error));
  EXPECT_FALSE(b.greedy.empty());
  if (b.greedy.empty()) return error;
  const std::size_t vocab = b.step_logits.size() / b.greedy.size();
  float largest = 0.0f;
  for (float logit : b.logits) largest = std::max(largest, std::fabs(logit));
  std::size_t agreed = b.greedy.size();  // steps before the first near tie
  for (std::size_t i = 0; i < b.greedy.size(); ++i) {
    const float *want = b.step_logits.data() + i * vocab, *got = a.step_logits.data() + i * vocab;
    const auto choice = std::max_element(want, want + vocab) - want, taken = std::max_element(got, got + vocab) - got;
    if (choice == taken) continue;
    const float lead = want[choice] - want[taken];
    ::testing::Test::RecordProperty("near_tie", "step " + std::to_string(i) + " lead " + std::to_string(lead));
    EXPECT_LE(lead, error * largest) << "step " << i << ": the expanded file's choice " << choice << " leads " << taken
                                     << " by more than the format's error";
    agreed = std::min(agreed, i);
  }
  const std::size_t compared = std::min({agreed, a.greedy.size(), b.greedy.size()});
  EXPECT_TRUE(std::equal(a.greedy.begin(), a.greedy.begin() + static_cast<std::ptrdiff_t>(compared), b.greedy.begin()))
      << "greedy continuations differ before step " << compared;
  return error;
}

}  // namespace troupe::testing
