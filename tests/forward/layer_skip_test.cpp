// The layer-skipping drafter (self-speculation): the target's own uploaded
// weights with some decoder layers left out must compute exactly what a
// checkpoint holding only those layers computes, on its own backend.

#include <gtest/gtest.h>

#include "tests/forward/forward_fixture.hpp"

namespace troupe {
namespace {

using testing::fixture_model;
using testing::logits_of;

class LayerSkip : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerSkip, DrafterEqualsACheckpointOfTheKeptLayers) {
  auto f = fixture_model::load(GetParam());
  ASSERT_GE(f.ckpt.weights().layers.size(), 2u);
  const std::vector<int> kept = {1};  // the fixtures have two layers: skip the first

  // The reference: the same tensors, with only the kept layers, uploaded anew.
  model_config pruned_config = f.ckpt.config();
  pruned_config.num_hidden_layers = static_cast<std::int64_t>(kept.size());
  model_weights pruned = f.ckpt.weights();
  pruned.layers = {f.ckpt.weights().layers[1]};
  llama_model reference(pruned_config, pruned, *f.device);

  const auto second_backend = make_backend("cpu", {.threads = 2});
  llama_model drafter(*f.model, *second_backend, kept);
  EXPECT_EQ(drafter.num_layers(), 1);
  EXPECT_EQ(drafter.kv_spec(16, 8, dtype::f32).num_layers, 1);

  const auto expected = logits_of(reference, f.prompts);
  const auto got = logits_of(drafter, f.prompts);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "prompt " << i;
  // And it is not the full model.
  EXPECT_NE(logits_of(*f.model, f.prompts)[0], got[0]);
}

TEST_P(LayerSkip, DrafterOfEveryLayerIsTheModel) {
  auto f = fixture_model::load(GetParam());
  std::vector<int> all(f.ckpt.weights().layers.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  const auto second_backend = make_backend("cpu", {.threads = 2});
  llama_model drafter(*f.model, *second_backend, all);
  EXPECT_EQ(logits_of(drafter, f.prompts), logits_of(*f.model, f.prompts));
}

TEST(LayerSkipLayers, BadLayerListsAreRefused) {
  auto f = fixture_model::load("llama_f32");
  const auto second_backend = make_backend("cpu", {.threads = 2});
  EXPECT_THROW(llama_model(*f.model, *second_backend, {}), std::invalid_argument);
  EXPECT_THROW(llama_model(*f.model, *second_backend, {1, 0}), std::invalid_argument);
  EXPECT_THROW(llama_model(*f.model, *second_backend, {0, 0}), std::invalid_argument);
  EXPECT_THROW(llama_model(*f.model, *second_backend, {0, 99}), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Models, LayerSkip, ::testing::Values("llama_f32", "qwen3_bf16"));

}  // namespace
}  // namespace troupe
