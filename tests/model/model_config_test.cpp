// config.json parsing: the files transformers writes, the older
// transformers 4 layout, every rope variant, sliding windows and bad input.

#include "model/model_config.hpp"

#include <boost/json.hpp>
#include <cmath>

#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

std::filesystem::path fixture(const std::string& relative) {
  return std::filesystem::path(TROUPE_FIXTURES_DIR) / "model" / relative;
}

// A minimal valid Llama config with the fields `extra` appended (tests add
// only keys this base does not already hold).
std::string llama_config(const std::string& extra = "") {
  return R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
             "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(ModelConfig, ReadsConfigsSavedByTransformers) {
  const model_config llama = load_model_config(fixture("hf_tiny/llama"));
  EXPECT_EQ(llama.architecture, model_architecture::llama);
  EXPECT_EQ(llama.hidden_size, 32);
  EXPECT_EQ(llama.intermediate_size, 64);
  EXPECT_EQ(llama.num_hidden_layers, 2);
  EXPECT_EQ(llama.num_attention_heads, 4);
  EXPECT_EQ(llama.num_key_value_heads, 2);
  EXPECT_EQ(llama.head_dim, 8);
  EXPECT_EQ(llama.vocab_size, 64);
  EXPECT_EQ(llama.max_position_embeddings, 256);
  EXPECT_EQ(llama.max_context_length, 256);
  EXPECT_TRUE(llama.tie_word_embeddings);
  EXPECT_FALSE(llama.qkv_bias);
  EXPECT_EQ(llama.torch_dtype, dtype::f32);
  EXPECT_EQ(llama.bos_token_id, 1);
  EXPECT_EQ(llama.eos_token_ids, std::vector<std::int64_t>{2});
  EXPECT_EQ(llama.rope.scaling, rope_scaling_kind::llama3);
  EXPECT_EQ(llama.rope.theta, 500000.0);
  EXPECT_EQ(llama.rope.factor, 8.0);
  EXPECT_EQ(llama.rope.original_max_position, 64);
  EXPECT_EQ(llama.rope.head_dim, 8);

  const model_config mistral = load_model_config(fixture("hf_tiny/mistral"));
  EXPECT_EQ(mistral.architecture, model_architecture::mistral);
  EXPECT_FALSE(mistral.qkv_bias);
  EXPECT_EQ(mistral.torch_dtype, dtype::bf16);
  EXPECT_FALSE(mistral.sliding_window.has_value());  // transformers' default 4096 exceeds the 256 positions
  EXPECT_EQ(mistral.max_context_length, 256);

  const model_config qwen2 = load_model_config(fixture("hf_tiny/qwen2"));
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_bias);
  EXPECT_FALSE(qwen2.qk_norm);
  EXPECT_EQ(qwen2.torch_dtype, dtype::f16);

  const model_config qwen3 = load_model_config(fixture("hf_tiny/qwen3"));
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_EQ(qwen3.head_dim, 16);  // explicit, not hidden / heads
  EXPECT_EQ(qwen3.q_size(), 64);
  EXPECT_EQ(qwen3.kv_size(), 32);
}

TEST(ModelConfig, ReadsTheTransformers4Layout) {
  // Llama 3.2 as published: top-level rope_theta, rope_scaling with rope_type, torch_dtype, eos list.
  const model_config config = parse_model_config(llama_config(
      R"("num_key_value_heads": 2, "head_dim": 16, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
         "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                          "original_max_position_embeddings": 8192, "rope_type": "llama3"},
         "max_position_embeddings": 131072, "eos_token_id": [128001, 128008, 128009], "bos_token_id": 128000)"));
  EXPECT_EQ(config.rope.theta, 500000.0);
  EXPECT_EQ(config.rope.scaling, rope_scaling_kind::llama3);
  EXPECT_EQ(config.rope.factor, 32.0);
  EXPECT_EQ(config.rope.low_freq_factor, 1.0);
  EXPECT_EQ(config.rope.high_freq_factor, 4.0);
  EXPECT_EQ(config.rope.original_max_position, 8192);
  EXPECT_EQ(config.rope.max_position_embeddings, 131072);
  EXPECT_EQ(config.torch_dtype, dtype::bf16);
  EXPECT_EQ(config.eos_token_ids, (std::vector<std::int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(config.head_dim, 16);
}

struct rope_case {
  const char* name;
  std::string fields;
  rope_scaling_kind kind;
  double theta;
  double factor;
};

class RopeVariant : public ::testing::TestWithParam<rope_case> {};

TEST_P(RopeVariant, ParsesIntoRopeSpec) {
  const rope_case& c = GetParam();
  const model_config config = parse_model_config(llama_config(c.fields));
  EXPECT_EQ(config.rope.scaling, c.kind);
  EXPECT_EQ(config.rope.theta, c.theta);
  EXPECT_EQ(config.rope.factor, c.factor);
}

INSTANTIATE_TEST_SUITE_P(
    BothForms, RopeVariant,
    ::testing::Values(
        rope_case{"none_defaults", "", rope_scaling_kind::none, 10000.0, 1.0},
        rope_case{"top_level_theta", R"("rope_theta": 250000)", rope_scaling_kind::none, 250000.0, 1.0},
        rope_case{"linear_old_type_key", R"("rope_theta": 20000.0, "rope_scaling": {"type": "linear", "factor": 2.0})",
                  rope_scaling_kind::linear, 20000.0, 2.0},
        rope_case{"linear_rope_type", R"("rope_scaling": {"rope_type": "linear", "factor": 4})",
                  rope_scaling_kind::linear, 10000.0, 4.0},
        rope_case{"dynamic_old_type_key", R"("rope_scaling": {"type": "dynamic", "factor": 2.5})",
                  rope_scaling_kind::dynamic, 10000.0, 2.5},
        rope_case{"dynamic_parameters",
                  R"("rope_parameters": {"rope_type": "dynamic", "factor": 3.0, "rope_theta": 1e6})",
                  rope_scaling_kind::dynamic, 1e6, 3.0},
        rope_case{"linear_parameters",
                  R"("rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 5e5})",
                  rope_scaling_kind::linear, 5e5, 2.0},
        rope_case{"llama3_parameters",
                  R"("rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "rope_theta": 500000.0})",
                  rope_scaling_kind::llama3, 500000.0, 8.0},
        rope_case{"default_parameters", R"("rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0})",
                  rope_scaling_kind::none, 1e6, 1.0},
        rope_case{"parameters_theta_beats_top_level",
                  R"("rope_theta": 10.0, "rope_parameters": {"rope_type": "default", "rope_theta": 77.0})",
                  rope_scaling_kind::none, 77.0, 1.0},
        rope_case{
            "null_scaling_falls_back_to_parameters",
            R"("rope_scaling": null, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 9.0})",
            rope_scaling_kind::linear, 9.0, 2.0}),
    [](const ::testing::TestParamInfo<rope_case>& info) { return std::string(info.param.name); });

TEST(ModelConfig, RopeSpecGivesTheFrequenciesTransformersComputes) {
  const boost::json::value cases = boost::json::parse(testing::read_file(fixture("rope_cases.json")));
  for (const auto& item : cases.as_array()) {
    const std::string name(item.at("name").as_string());
    const model_config config = parse_model_config(std::string(item.at("config").as_string()));
    const std::vector<float> ours = rope_inverse_frequencies(config.rope, item.at("seq_len").to_number<std::int64_t>());
    const auto& theirs = item.at("inv_freq").as_array();
    ASSERT_EQ(ours.size(), theirs.size()) << name;
    for (std::size_t i = 0; i < ours.size(); ++i) {
      const float expected = theirs[i].to_number<float>();
      EXPECT_NEAR(ours[i], expected, 2e-6f * std::abs(expected)) << name << " [" << i << "]";
    }
  }
}

TEST(ModelConfig, Llama3OriginalContextDefaultsToMaxPositions) {
  const model_config config = parse_model_config(llama_config(
      R"("max_position_embeddings": 4096, "rope_parameters": {"rope_type": "llama3", "factor": 8.0,
         "low_freq_factor": 1.0, "high_freq_factor": 4.0})"));
  EXPECT_EQ(config.rope.original_max_position, 4096);
}

TEST(ModelConfig, HeadDimDefaultsToHiddenOverHeads) {
  const model_config config = parse_model_config(llama_config());
  EXPECT_EQ(config.head_dim, 16);
  EXPECT_EQ(config.num_key_value_heads, 4);  // defaults to the query heads
  EXPECT_EQ(config.max_position_embeddings, 2048);
}

TEST(ModelConfig, LlamaAttentionBiasCoversAllFourProjections) {
  const model_config config = parse_model_config(llama_config(R"("attention_bias": true)"));
  EXPECT_TRUE(config.qkv_bias);
  EXPECT_TRUE(config.o_bias);
}

TEST(ModelConfig, ModelTypeIdentifiesTheArchitectureWhenArchitecturesIsAbsent) {
  const model_config config = parse_model_config(
      R"({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "vocab_size": 100})");
  EXPECT_EQ(config.architecture, model_architecture::qwen2);
  EXPECT_TRUE(config.qkv_bias);
}

std::string mistral_config(const std::string& window) {
  return R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
             "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
             "max_position_embeddings": 32768, "sliding_window": )" +
         window + "}";
}

TEST(ModelConfig, MistralSlidingWindowCapsTheContext) {
  const model_config windowed = parse_model_config(mistral_config("4096"));
  EXPECT_EQ(windowed.sliding_window, 4096);
  EXPECT_EQ(windowed.max_context_length, 4096);
  EXPECT_EQ(windowed.max_position_embeddings, 32768);
  const model_config full = parse_model_config(mistral_config("null"));
  EXPECT_FALSE(full.sliding_window.has_value());
  EXPECT_EQ(full.max_context_length, 32768);
  const model_config wide = parse_model_config(mistral_config("131072"));
  EXPECT_FALSE(wide.sliding_window.has_value());
  EXPECT_EQ(wide.max_context_length, 32768);
}

std::string qwen2_config(const std::string& extra) {
  return R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
             "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
             "max_position_embeddings": 32768, )" +
         extra + "}";
}

TEST(ModelConfig, QwenSlidingWindowOnlyWhenALayerUsesIt) {
  // Qwen2.5 as published: a window is written but switched off.
  const model_config off = parse_model_config(qwen2_config(R"("sliding_window": 32768, "use_sliding_window": false)"));
  EXPECT_FALSE(off.sliding_window.has_value());
  EXPECT_EQ(off.max_context_length, 32768);
  const model_config on = parse_model_config(qwen2_config(
      R"("sliding_window": 1024, "use_sliding_window": true, "layer_types": ["full_attention", "sliding_attention"])"));
  EXPECT_EQ(on.sliding_window, 1024);
  EXPECT_EQ(on.max_context_length, 1024);
  // Without layer_types, layers from max_window_layers on slide; 2 layers, max_window_layers 28: none.
  const model_config below = parse_model_config(qwen2_config(R"("sliding_window": 1024, "use_sliding_window": true)"));
  EXPECT_FALSE(below.sliding_window.has_value());
  const model_config above =
      parse_model_config(qwen2_config(R"("sliding_window": 1024, "use_sliding_window": true, "max_window_layers": 1)"));
  EXPECT_EQ(above.max_context_length, 1024);
}

std::string parse_error(const std::string& text) {
  return error_of([&] { parse_model_config(text); });
}

TEST(ModelConfigHostile, UnsupportedArchitecture) {
  EXPECT_EQ(parse_error(R"({"architectures": ["GPT2LMHeadModel"], "hidden_size": 64})"),
            "config.json: unsupported architecture 'GPT2LMHeadModel' (supported: LlamaForCausalLM, "
            "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");
  EXPECT_THAT(parse_error(R"({"model_type": "gemma"})"), HasSubstr("unsupported architecture: model_type 'gemma'"));
  EXPECT_EQ(parse_error(R"({"hidden_size": 64})"),
            "config.json: field 'architectures' is missing (and there is no model_type)");
}

TEST(ModelConfigHostile, MalformedFieldTypes) {
  const std::string base = R"("architectures": ["LlamaForCausalLM"], "intermediate_size": 128,
                              "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100)";
  EXPECT_EQ(parse_error("{" + base + R"(, "hidden_size": "64"})"),
            "config.json: field 'hidden_size' must be an integer, got string");
  EXPECT_EQ(parse_error("{" + base + R"(, "hidden_size": 64.0})"),
            "config.json: field 'hidden_size' must be an integer, got number");
  EXPECT_EQ(parse_error(llama_config(R"("tie_word_embeddings": 1)")),
            "config.json: field 'tie_word_embeddings' must be true or false, got integer");
  EXPECT_EQ(parse_error(llama_config(R"("rope_scaling": {"rope_type": "linear", "factor": "2"})")),
            "config.json: field 'rope_scaling.factor' must be a number, got string");
  EXPECT_EQ(parse_error(llama_config(R"("eos_token_id": [1, "2"])")),
            "config.json: field 'eos_token_id' must be a list of integers, found string");
  EXPECT_EQ(parse_error(llama_config(R"("rope_parameters": [1])")),
            "config.json: field 'rope_parameters' must be an object, got array");
  EXPECT_EQ(parse_error(R"({"architectures": "LlamaForCausalLM"})"),
            "config.json: field 'architectures' must be a list of strings, got string");
  EXPECT_EQ(parse_error("[1]"), "config.json: must hold a JSON object, got array");
  EXPECT_THAT(parse_error("{\"hidden_size\": 6"), HasSubstr("config.json: not valid JSON"));
}

TEST(ModelConfigHostile, InvalidSizes) {
  EXPECT_EQ(parse_error(llama_config(R"("num_key_value_heads": 3)")),
            "config.json: field 'num_key_value_heads' (3) must divide num_attention_heads (4)");
  EXPECT_EQ(parse_error(llama_config(R"("head_dim": 15)")), "config.json: field 'head_dim' (15) must be even for RoPE");
  EXPECT_EQ(parse_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": -64})"),
            "config.json: field 'hidden_size' (-64) must be in [1, 1048576]");
  EXPECT_EQ(parse_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})"),
            "config.json: field 'intermediate_size' is missing");
  EXPECT_EQ(
      parse_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 66, "intermediate_size": 8,
                            "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10})"),
      "config.json: field 'hidden_size' (66) is not divisible by num_attention_heads (4) and there is no head_dim");
  EXPECT_EQ(parse_error(llama_config(R"("rms_norm_eps": 0)")),
            "config.json: field 'rms_norm_eps' (0.0) must be positive");
  EXPECT_EQ(parse_error(llama_config(R"("eos_token_id": -1)")),
            "config.json: field 'eos_token_id' (-1) must not be negative");
}

TEST(ModelConfigHostile, UnsupportedFeatures) {
  EXPECT_EQ(parse_error(llama_config(R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0})")),
            "config.json: field 'rope_scaling.rope_type' 'yarn' is not supported (supported: default, linear, dynamic, "
            "llama3)");
  EXPECT_EQ(parse_error(llama_config(R"("rope_scaling": {"rope_type": "linear"})")),
            "config.json: field 'rope_scaling.factor' is missing");
  EXPECT_EQ(parse_error(llama_config(R"("hidden_act": "gelu")")),
            "config.json: field 'hidden_act' 'gelu' is not supported (only silu)");
  EXPECT_EQ(parse_error(llama_config(R"("mlp_bias": true)")), "config.json: field 'mlp_bias' true is not supported");
  EXPECT_EQ(parse_error(llama_config(R"("rope_parameters": {"full_attention": {"rope_type": "default"}})")),
            "config.json: field 'rope_parameters.full_attention' is nested: per-layer-type rope parameters are not "
            "supported");
  EXPECT_EQ(parse_error(llama_config(R"("partial_rotary_factor": 0.5)")),
            "config.json: field 'partial_rotary_factor' other than 1 is not supported");
}

TEST(ModelConfigHostile, MissingFileNamesIt) {
  testing::temp_dir dir;
  EXPECT_THAT(error_of([&] { load_model_config(dir.path()); }), HasSubstr("config.json: cannot read"));
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

// Linear and dynamic scaling stretch usable positions by their factor;
// llama3 states the stretched length in max_position_embeddings itself.
TEST(ModelConfig, ScaledRopeExtendsTheUsableContext) {
  const model_config linear = parse_model_config(
      llama_config(R"("max_position_embeddings": 100, "rope_scaling": {"rope_type": "linear", "factor": 4.0})"));
  EXPECT_EQ(linear.max_context_length, 400);
  const model_config dynamic = parse_model_config(
      llama_config(R"("max_position_embeddings": 32, "rope_scaling": {"type": "dynamic", "factor": 2.0})"));
  EXPECT_EQ(dynamic.max_context_length, 64);
  const model_config llama3 = parse_model_config(llama_config(
      R"("max_position_embeddings": 1000, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 100})"));
  EXPECT_EQ(llama3.max_context_length, 1000);
}

}  // namespace
}  // namespace troupe
