// The shipped demo pair (model/demo/, trained by tools/train/) against the
// references nobody here wrote: transformers' perplexity of the held-out
// split and HF tokenizers' ids of it (tests/fixtures/demo/, written by
// tools/train/evaluate.py from the same weights).

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <sstream>

#include "kernels/backend.hpp"
#include "model/checkpoint.hpp"
#include "model/demo_model.hpp"
#include "model/llama_model.hpp"
#include "model/perplexity.hpp"
#include "model/text/tokenizer.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

struct heldout_reference {
  std::string text;
  std::vector<std::int32_t> ids;  ///< HF tokenizers' ids of `text`, with <|begin_of_text|>
  std::size_t window = 0;
  double target_perplexity = 0;
  double draft_perplexity = 0;
};

heldout_reference load_reference() {
  const std::filesystem::path dir = std::filesystem::path(TROUPE_FIXTURES_DIR) / "demo";
  const auto json = boost::json::parse(testing::read_file(dir / "heldout_reference.json")).as_object();
  heldout_reference ref;
  ref.text = testing::read_file(dir / std::string(json.at("text_file").as_string()));
  for (const auto& id : json.at("ids").as_array()) ref.ids.push_back(static_cast<std::int32_t>(id.as_int64()));
  ref.window = static_cast<std::size_t>(json.at("window").as_int64());
  ref.target_perplexity = json.at("perplexity").at("target").as_double();
  ref.draft_perplexity = json.at("perplexity").at("draft").as_double();
  return ref;
}

class DemoPairTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new testing::temp_dir();
    target_dir_ = ensure_demo_model(root_->path());
    draft_dir_ = ensure_demo_draft_model(root_->path());
  }
  static void TearDownTestSuite() { delete root_; }

  static double perplexity_of(const std::filesystem::path& dir, const heldout_reference& ref) {
    const checkpoint weights = checkpoint::open(dir, {.show_progress = false});
    backend_options options;
    options.threads = 2;
    const auto device = make_backend("cpu", options);
    llama_model model(weights.config(), weights.weights(), *device);
    batch_runner runner(model, runner_options{});
    return windowed_perplexity(runner, ref.ids, static_cast<std::size_t>(model.vocab_size()), ref.window, 512)
        .perplexity;
  }

  static inline testing::temp_dir* root_ = nullptr;
  static inline std::filesystem::path target_dir_;
  static inline std::filesystem::path draft_dir_;
};

TEST_F(DemoPairTest, BothLoadThroughTheHuggingFaceLoader) {
  const checkpoint target = checkpoint::open(target_dir_, {.show_progress = false});
  const checkpoint draft = checkpoint::open(draft_dir_, {.show_progress = false});
  EXPECT_EQ(target.config().architecture, model_architecture::llama);
  EXPECT_EQ(target.weights().embed_tokens->type, dtype::bf16);
  EXPECT_TRUE(target.config().tie_word_embeddings);
  EXPECT_LT(target.config().num_key_value_heads, target.config().num_attention_heads);  // GQA
  EXPECT_EQ(draft.config().vocab_size, target.config().vocab_size);
  EXPECT_LE(draft.config().hidden_size, target.config().hidden_size);
  EXPECT_GE(draft.config().num_hidden_layers, 1);
  EXPECT_LE(draft.config().num_hidden_layers, 2);
  EXPECT_GT(target.config().num_hidden_layers, draft.config().num_hidden_layers);
  const auto tokenizer = text::tokenizer::load(target_dir_);
  EXPECT_EQ(tokenizer->vocab_size(), target.config().vocab_size);
  EXPECT_EQ(testing::read_file(draft_dir_ / "tokenizer.json"), testing::read_file(target_dir_ / "tokenizer.json"));
}

TEST_F(DemoPairTest, TokenizerMatchesHfIdsAndRoundTripsTheHeldOutSplit) {
  const heldout_reference ref = load_reference();
  const auto tokenizer = text::tokenizer::load(target_dir_);
  const std::vector<std::int32_t> ids = tokenizer->encode(ref.text, true);
  ASSERT_EQ(ids.size(), ref.ids.size());
  EXPECT_EQ(ids, ref.ids);
  const std::span<const std::int32_t> without_bos(ids.data() + 1, ids.size() - 1);
  EXPECT_EQ(tokenizer->decode(without_bos, false), ref.text);  // byte-exact
}

TEST_F(DemoPairTest, TargetPerplexityMatchesTransformersWithinOnePercent) {
  const heldout_reference ref = load_reference();
  const double ours = perplexity_of(target_dir_, ref);
  EXPECT_NEAR(ours / ref.target_perplexity, 1.0, 0.01)
      << "troupe " << ours << ", transformers " << ref.target_perplexity;
}

TEST_F(DemoPairTest, DraftPerplexityMatchesTransformersWithinOnePercent) {
  const heldout_reference ref = load_reference();
  const double ours = perplexity_of(draft_dir_, ref);
  EXPECT_NEAR(ours / ref.draft_perplexity, 1.0, 0.01) << "troupe " << ours << ", transformers " << ref.draft_perplexity;
}

}  // namespace
}  // namespace troupe
