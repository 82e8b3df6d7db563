// GGUF files written by the `gguf` package from PyPI (llama.cpp's writer and
// quantisers; tools/fixtures/make_gguf_fixtures.py) from the `make-model`
// checkpoint rebuilt here with the same seed: the config, every weight, the
// logits, the greedy continuation and the tokenizer against the HF original.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cmath>
#include <sstream>

#include "kernels/backend.hpp"
#include "model/batch_runner.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf_tokenizer.hpp"
#include "model/llama_model.hpp"
#include "model/make_model.hpp"
#include "model/model_files.hpp"
#include "model/text/tokenizer.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

const std::filesystem::path fixtures = std::filesystem::path(TROUPE_FIXTURES_DIR) / "gguf";

// The checkpoint make_gguf_fixtures.py converted.
class GgufModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new testing::temp_dir();
    for (auto arch : {model_architecture::llama, model_architecture::qwen2, model_architecture::qwen3}) {
      make_model_options options;
      options.architecture = arch;
      options.preset = model_preset::tiny;
      options.type = dtype::bf16;
      options.seed = 14;
      options.output_dir = root_->path() / std::string(architecture_model_type(arch));
      options.show_progress = false;
      make_model(options);
    }
  }
  static void TearDownTestSuite() { delete root_; }
  static std::filesystem::path hf_dir(std::string_view arch = "llama") { return root_->path() / std::string(arch); }

  static inline testing::temp_dir* root_ = nullptr;
};

std::vector<float> values_of(const host_tensor& tensor) {
  std::vector<float> out(static_cast<std::size_t>(tensor.numel()));
  convert_elements(tensor.data, tensor.type, out.data(), dtype::f32, out.size());
  return out;
}

// Logits of every position of `prompt` and the greedy continuation of `steps` tokens.
struct run_result {
  std::vector<float> logits;
  std::vector<std::int32_t> greedy;
};

run_result run(const std::filesystem::path& model_path, const std::vector<std::int32_t>& prompt, int steps) {
  const checkpoint weights = checkpoint::open(model_path, {.show_progress = false});
  backend_options options;
  options.threads = 2;
  const auto device = make_backend("cpu", options);
  llama_model model(weights.config(), weights.weights(), *device);
  batch_runner runner(model, runner_options{});
  run_result out;
  out.logits = runner.prompt_logits({prompt}, 512)[0];
  runner_request request;
  request.prompt = prompt;
  request.max_tokens = steps;
  request.params.temperature = 0.0;
  out.greedy = runner.generate({request})[0].tokens;
  return out;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double{a[i]} - double{b[i]}));
  return worst;
}

double max_abs(const std::vector<float>& a) {
  double worst = 0.0;
  for (float v : a) worst = std::max(worst, std::abs(double{v}));
  return worst;
}

const std::vector<std::int32_t> prompt = {572, 293, 220, 426, 72, 66, 74, 276, 501, 289, 78, 87, 11, 220, 257, 299};

TEST_F(GgufModelTest, ConfigMatchesTheHfCheckpointIncludingLlama3RopeScaling) {
  const checkpoint hf = checkpoint::open(hf_dir(), {.show_progress = false});
  const checkpoint gguf = checkpoint::open(fixtures / "llama_tiny_bf16.gguf", {.show_progress = false});
  const model_config& a = hf.config();
  const model_config& b = gguf.config();
  EXPECT_EQ(b.architecture, a.architecture);
  EXPECT_EQ(b.hidden_size, a.hidden_size);
  EXPECT_EQ(b.intermediate_size, a.intermediate_size);
  EXPECT_EQ(b.num_hidden_layers, a.num_hidden_layers);
  EXPECT_EQ(b.num_attention_heads, a.num_attention_heads);
  EXPECT_EQ(b.num_key_value_heads, a.num_key_value_heads);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  EXPECT_EQ(b.max_position_embeddings, a.max_position_embeddings);
  EXPECT_FLOAT_EQ(b.rms_norm_eps, a.rms_norm_eps);
  EXPECT_EQ(b.tie_word_embeddings, a.tie_word_embeddings);
  EXPECT_EQ(b.rope.scaling, rope_scaling_kind::llama3);
  const std::vector<float> expected = rope_inverse_frequencies(a.rope, 1);
  const std::vector<float> actual = rope_inverse_frequencies(b.rope, 1);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-6 * expected[i]) << i;
  EXPECT_EQ(b.bos_token_id, a.bos_token_id);
  EXPECT_EQ(gguf.weights().embed_tokens->type, dtype::bf16);
}

TEST_F(GgufModelTest, Bf16WeightsEqualTheHfOnesAfterUndoingTheRopePermutation) {
  const checkpoint hf = checkpoint::open(hf_dir(), {.show_progress = false});
  const checkpoint gguf = checkpoint::open(fixtures / "llama_tiny_bf16.gguf", {.show_progress = false});
  const auto same = [](const host_tensor* a, const host_tensor* b) {
    ASSERT_EQ(a->shape, b->shape) << a->name;
    EXPECT_EQ(values_of(*a), values_of(*b)) << a->name;
  };
  same(hf.weights().embed_tokens, gguf.weights().embed_tokens);
  same(hf.weights().final_norm, gguf.weights().final_norm);
  for (std::size_t i = 0; i < hf.weights().layers.size(); ++i) {
    const layer_weights& a = hf.weights().layers[i];
    const layer_weights& b = gguf.weights().layers[i];
    for (auto member : {&layer_weights::q_proj, &layer_weights::k_proj, &layer_weights::v_proj, &layer_weights::o_proj,
                        &layer_weights::gate_proj, &layer_weights::up_proj, &layer_weights::down_proj,
                        &layer_weights::input_norm, &layer_weights::post_attention_norm})
      same(a.*member, b.*member);
  }
}

TEST_F(GgufModelTest, Bf16FileGivesTheHfLogitsAndGreedyContinuation) {
  const run_result hf = run(hf_dir(), prompt, 24);
  const run_result gguf = run(fixtures / "llama_tiny_bf16.gguf", prompt, 24);
  ASSERT_EQ(gguf.logits.size(), hf.logits.size());
  // The same bf16 weights, but the llama3 RoPE parameters are recovered from
  // llama.cpp's f32 frequency divisors (to 1e-6, above), so rotated q and k
  // may differ in their last bits: the logits agree to float rounding.
  EXPECT_LE(max_abs_difference(gguf.logits, hf.logits), 1e-5 * max_abs(hf.logits));
  EXPECT_EQ(gguf.greedy, hf.greedy);
}

// Measured on this fixture (max |Δlogit| over all positions / max |logit|):
// Q8_0 0.0131, Q4_0 0.218 (random weights are hard on 4-bit blocks); the
// bounds leave 1.5x room. Q8_0's greedy continuation matches over 8 tokens.
TEST_F(GgufModelTest, QuantisedFilesStayWithinRecordedLogitBounds) {
  const run_result hf = run(hf_dir(), prompt, 8);
  const double scale = max_abs(hf.logits);
  const run_result q8 = run(fixtures / "llama_tiny_q8_0.gguf", prompt, 8);
  const run_result q4 = run(fixtures / "llama_tiny_q4_0.gguf", prompt, 8);
  const double q8_error = max_abs_difference(q8.logits, hf.logits) / scale;
  const double q4_error = max_abs_difference(q4.logits, hf.logits) / scale;
  RecordProperty("q8_0_relative_error", std::to_string(q8_error));
  RecordProperty("q4_0_relative_error", std::to_string(q4_error));
  EXPECT_LE(q8_error, 0.02);
  EXPECT_LE(q4_error, 0.33);
  EXPECT_GT(q4_error, q8_error);
  EXPECT_EQ(q8.greedy, hf.greedy);
}

// Qwen's rows are not permuted, q/k/v carry biases (Qwen2) and q/k have
// norms (Qwen3). Measured relative logit errors of Q8_0: qwen2 0.0128, qwen3 0.0139.
TEST_F(GgufModelTest, QwenQ8FilesMatchTheirHfOriginals) {
  for (const char* arch : {"qwen2", "qwen3"}) {
    const run_result hf = run(hf_dir(arch), prompt, 8);
    const run_result q8 = run(fixtures / (std::string(arch) + "_tiny_q8_0.gguf"), prompt, 8);
    const double error = max_abs_difference(q8.logits, hf.logits) / max_abs(hf.logits);
    EXPECT_LE(error, 0.02) << arch;
    EXPECT_EQ(q8.greedy, hf.greedy) << arch;
  }
  const checkpoint qwen2 = checkpoint::open(fixtures / "qwen2_tiny_q8_0.gguf", {.show_progress = false});
  EXPECT_TRUE(qwen2.config().qkv_bias);
  EXPECT_NE(qwen2.weights().layers[0].q_bias, nullptr);
  const checkpoint qwen3 = checkpoint::open(fixtures / "qwen3_tiny_q8_0.gguf", {.show_progress = false});
  EXPECT_TRUE(qwen3.config().qk_norm);
}

TEST_F(GgufModelTest, EmbeddedTokenizerAndChatTemplateMatchTheHfFiles) {
  const auto hf = text::tokenizer::load(hf_dir());
  const auto gguf = load_model_tokenizer(fixtures / "llama_tiny_bf16.gguf");
  EXPECT_EQ(gguf->vocab_size(), hf->vocab_size());
  std::istringstream strings(testing::read_file(std::filesystem::path(TROUPE_FIXTURES_DIR) / "text/strings.jsonl"));
  int checked = 0;
  for (std::string line; std::getline(strings, line); ++checked) {
    const std::string text(boost::json::parse(line).as_string());
    const std::vector<std::int32_t> ids = hf->encode(text, true);
    ASSERT_EQ(gguf->encode(text, true), ids) << text;
    ASSERT_EQ(gguf->encode(text, false), hf->encode(text, false)) << text;
    ASSERT_EQ(gguf->decode(ids, false), hf->decode(ids, false)) << text;
  }
  EXPECT_GT(checked, 2000);
  const chat_template_source hf_template = load_model_chat_template(hf_dir());
  const chat_template_source gguf_template = load_model_chat_template(fixtures / "llama_tiny_bf16.gguf");
  EXPECT_EQ(gguf_template.templates, hf_template.templates);
  EXPECT_EQ(gguf_template.special_tokens.at("bos_token"), hf_template.special_tokens.at("bos_token"));
  const generation_config generation = load_model_generation_config(fixtures / "llama_tiny_bf16.gguf");
  EXPECT_EQ(generation.bos_token_id, 572);
  EXPECT_EQ(generation.eos_token_ids, std::vector<std::int64_t>{576});
}

}  // namespace
}  // namespace troupe
