// The step workspace's cap (llama_model::set_workspace_limit, fixed by the
// engine from knob max_step_workspace_bytes): a step that needs more throws
// std::length_error before allocating, and the model runs smaller steps
// afterwards with the same results as an uncapped one.

#include <gtest/gtest.h>

#include <numeric>

#include "model/batch_runner.hpp"
#include "model/checkpoint.hpp"
#include "model/make_model.hpp"
#include "model_test_util.hpp"

namespace troupe {
namespace {

class LlamaModelWorkspace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new testing::temp_dir();
    make_model_options options;
    options.seed = 3;
    options.output_dir = root_->path() / "tiny";
    options.show_progress = false;
    make_model(options);
  }
  static void TearDownTestSuite() { delete root_; }

  /// Logits of every position of a 40-token prompt, `chunk` tokens per step.
  static std::vector<float> prompt_logits(llama_model& model, int chunk) {
    std::vector<std::int32_t> prompt(40);
    std::iota(prompt.begin(), prompt.end(), 5);
    batch_runner runner(model, {});
    return runner.prompt_logits({prompt}, chunk)[0];
  }

  checkpoint ckpt = checkpoint::open(root_->path() / "tiny", {.show_progress = false});
  std::unique_ptr<backend> device = make_backend("cpu", 2);
  static inline testing::temp_dir* root_ = nullptr;
};

TEST_F(LlamaModelWorkspace, AStepPastTheLimitThrowsAndSmallerStepsStillRunExactly) {
  llama_model capped(ckpt.config(), ckpt.weights(), *device);
  // Room for a step of 16 tokens with a logits row each, nothing more.
  const std::size_t per_position = capped.workspace_bytes_per_token() + capped.workspace_bytes_per_row();
  capped.set_workspace_limit(16 * per_position);
  try {
    prompt_logits(capped, 40);
    FAIL() << "a 40-token step fitted in a workspace for 16";
  } catch (const std::length_error& error) {
    EXPECT_NE(std::string(error.what()).find("max_step_workspace_bytes"), std::string::npos) << error.what();
  }
  llama_model uncapped(ckpt.config(), ckpt.weights(), *device);
  EXPECT_EQ(prompt_logits(capped, 16), prompt_logits(uncapped, 16));
  EXPECT_EQ(prompt_logits(capped, 8), prompt_logits(uncapped, 8));
}

TEST_F(LlamaModelWorkspace, TheLimitCountsTheTokensActivationsAndTheRowsLogits) {
  llama_model model(ckpt.config(), ckpt.weights(), *device);
  const model_config& c = ckpt.config();
  const std::size_t f32 = sizeof(float);  // the CPU backend's activations
  const auto qkv = (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim;
  EXPECT_EQ(
      model.workspace_bytes_per_token(),
      static_cast<std::size_t>(3 * c.hidden_size + qkv + c.num_attention_heads * c.head_dim + 3 * c.intermediate_size) *
          f32);
  EXPECT_EQ(model.workspace_bytes_per_row(), static_cast<std::size_t>(c.hidden_size + c.vocab_size) * f32);
}

}  // namespace
}  // namespace troupe
