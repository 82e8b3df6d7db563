// make_model: configs identical to what transformers writes, deterministic
// random weights, tokenizer handling and atomic output.

#include "model/make_model.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <cstring>

#include "model/builtin_tokenizer.hpp"
#include "model/checkpoint.hpp"
#include "model/python_json.hpp"
#include "model/random_weights.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::read_file;
using testing::temp_dir;
using testing::write_file;

make_model_options tiny_options(const std::filesystem::path& out, model_architecture arch = model_architecture::llama) {
  make_model_options options;
  options.architecture = arch;
  options.output_dir = out;
  options.show_progress = false;
  return options;
}

TEST(MakeModel, ConfigIsWhatTransformersWritesForEveryPreset) {
  for (model_architecture arch :
       {model_architecture::llama, model_architecture::mistral, model_architecture::qwen2, model_architecture::qwen3}) {
    for (const char* preset : {"tiny", "small", "1b", "8b"}) {
      make_model_options options;
      options.architecture = arch;
      options.preset = *parse_model_preset(preset);
      options.type =
          options.preset == model_preset::one_b || options.preset == model_preset::eight_b ? dtype::bf16 : dtype::f32;
      // The tokenizer numbers tools/fixtures/make_model_fixtures.py used.
      const std::string ours = make_config_json(options, 577, 572, {573, 576});
      const std::string name = std::string(architecture_model_type(arch)) + "_" + preset + ".json";
      const std::string theirs =
          read_file(std::filesystem::path(TROUPE_FIXTURES_DIR) / "model/make_model_configs" / name);
      EXPECT_EQ(ours, theirs) << name;
    }
  }
}

std::vector<float> values_of(const host_tensor& tensor) {
  std::vector<float> out(static_cast<std::size_t>(tensor.numel()));
  convert_elements(tensor.data, tensor.type, out.data(), dtype::f32, out.size());
  return out;
}

TEST(MakeModel, WeightsAreDeterministicAndShapedLikeHfInit) {
  temp_dir dir;
  make_model_options options = tiny_options(dir / "a", model_architecture::qwen2);
  options.seed = 5;
  make_model(options);
  options.output_dir = dir / "b";
  make_model(options);
  options.output_dir = dir / "c";
  options.seed = 6;
  make_model(options);
  EXPECT_EQ(read_file(dir / "a/model.safetensors"), read_file(dir / "b/model.safetensors"));
  EXPECT_NE(read_file(dir / "a/model.safetensors"), read_file(dir / "c/model.safetensors"));

  const checkpoint opened = checkpoint::open(dir / "a", {.show_progress = false});
  const auto stats = [&](const std::string& name) {
    const std::vector<float> v = values_of(*opened.find_tensor(name));
    double sum = 0, squares = 0;
    for (float x : v) sum += x;
    const double mean = sum / static_cast<double>(v.size());
    for (float x : v) squares += (x - mean) * (x - mean);
    return std::make_pair(mean, std::sqrt(squares / static_cast<double>(v.size())));
  };
  const auto [matrix_mean, matrix_std] = stats("model.layers.0.mlp.up_proj.weight");
  EXPECT_NEAR(matrix_mean, 0.0, 0.001);
  EXPECT_NEAR(matrix_std, 0.02, 0.001);
  const auto [norm_mean, norm_std] = stats("model.layers.2.input_layernorm.weight");
  EXPECT_NEAR(norm_mean, 1.0, 0.03);
  EXPECT_NEAR(norm_std, 0.1, 0.02);
  const auto [bias_mean, bias_std] = stats("model.layers.1.self_attn.q_proj.bias");
  EXPECT_NEAR(bias_mean, 0.0, 0.03);
  EXPECT_NEAR(bias_std, 0.1, 0.02);
  // Different tensors draw different values.
  EXPECT_NE(values_of(*opened.find_tensor("model.layers.0.mlp.up_proj.weight")),
            values_of(*opened.find_tensor("model.layers.0.mlp.gate_proj.weight")));
}

TEST(MakeModel, HalfPrecisionWeightsAreTheF32WeightsRounded) {
  temp_dir dir;
  make_model_options options = tiny_options(dir / "f32");
  make_model(options);
  for (dtype type : {dtype::bf16, dtype::f16}) {
    options.type = type;
    options.output_dir = dir / std::string(dtype_name(type));
    make_model(options);
  }
  const checkpoint f32 = checkpoint::open(dir / "f32", {.show_progress = false});
  const checkpoint bf16 = checkpoint::open(dir / "bf16", {.show_progress = false});
  const checkpoint f16 = checkpoint::open(dir / "f16", {.show_progress = false});
  for (const std::string name :
       {"model.embed_tokens.weight", "model.layers.3.self_attn.o_proj.weight", "model.norm.weight"}) {
    const host_tensor* reference = f32.find_tensor(name);
    const float* wide = static_cast<const float*>(reference->data);
    const auto* brain = static_cast<const std::uint16_t*>(bf16.find_tensor(name)->data);
    const auto* half = static_cast<const std::uint16_t*>(f16.find_tensor(name)->data);
    for (std::int64_t i = 0; i < reference->numel(); ++i) {
      ASSERT_EQ(brain[i], float_to_bf16(wide[i])) << name << "[" << i << "]";
      ASSERT_EQ(half[i], float_to_f16(wide[i])) << name << "[" << i << "]";
    }
  }
}

TEST(MakeModel, RandomValuesDoNotDependOnHowTheTensorIsChunked) {
  const random_tensor tensor{{"t", dtype::f32, {1000}}, init_kind::matrix};
  std::vector<float> whole(1000), pieces(1000);
  fill_random_values(9, tensor, 0, std::as_writable_bytes(std::span(whole)));
  fill_random_values(9, tensor, 0, std::as_writable_bytes(std::span(pieces).first(37)));
  fill_random_values(9, tensor, 37, std::as_writable_bytes(std::span(pieces).subspan(37, 500)));
  fill_random_values(9, tensor, 537, std::as_writable_bytes(std::span(pieces).subspan(537)));
  EXPECT_EQ(whole, pieces);
}

TEST(MakeModel, RefusesANonEmptyOutputAndLeavesNoStagingBehind) {
  temp_dir dir;
  std::filesystem::create_directories(dir / "out");
  write_file(dir / "out/keep.txt", "mine");
  EXPECT_EQ(error_of([&] { make_model(tiny_options(dir / "out")); }),
            (dir / "out").string() + ": output directory already exists and is not empty");
  EXPECT_EQ(read_file(dir / "out/keep.txt"), "mine");
  std::filesystem::create_directories(dir / "empty");
  make_model(tiny_options(dir / "empty"));
  EXPECT_TRUE(std::filesystem::exists(dir / "empty/model.safetensors"));
  std::vector<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) entries.push_back(entry.path().filename());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"empty", "out"}));
}

TEST(MakeModel, FailedWriteLeavesNoOutput) {
  temp_dir dir;
  make_model_options options = tiny_options(dir / "out");
  options.tokenizer_dir = dir / "no-such-tokenizer";
  EXPECT_THAT(error_of([&] { make_model(options); }), HasSubstr("tokenizer.json: cannot read"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(MakeModel, CopiesATokenizerDirectoryAndTakesItsSpecialIds) {
  temp_dir dir;
  const builtin_tokenizer builtin = make_builtin_tokenizer(1024);
  std::filesystem::create_directories(dir / "tok");
  write_file(dir / "tok/tokenizer.json", builtin.tokenizer_json);
  // eos as an AddedToken object, as older tokenizer_config.json files have it.
  write_file(
      dir / "tok/tokenizer_config.json",
      R"({"bos_token": "<|begin_of_text|>", "eos_token": {"__type": "AddedToken", "content": "<|end_of_text|>"}})");
  write_file(dir / "tok/chat_template.jinja", "{{ messages[0]['content'] }}");
  make_model_options options = tiny_options(dir / "out", model_architecture::mistral);
  options.tokenizer_dir = dir / "tok";
  make_model(options);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    EXPECT_EQ(read_file(dir / "out" / name), read_file(dir / "tok" / name)) << name;
  }
  const checkpoint opened = checkpoint::open(dir / "out", {.show_progress = false});
  EXPECT_EQ(opened.config().bos_token_id, builtin.begin_of_text_id);
  EXPECT_EQ(opened.config().eos_token_ids, std::vector<std::int64_t>{builtin.end_of_text_id});
  EXPECT_EQ(opened.generation().eos_token_ids, std::vector<std::int64_t>{builtin.end_of_text_id});
  EXPECT_EQ(opened.config().vocab_size, (builtin.size + 63) / 64 * 64);
}

TEST(MakeModel, TokenizerLargerThanThePresetVocabularyIsRefused) {
  temp_dir dir;
  std::filesystem::create_directories(dir / "tok");
  write_file(dir / "tok/tokenizer.json", R"({"added_tokens": [], "model": {"type": "BPE", "vocab": {"a": 200000}}})");
  make_model_options options = tiny_options(dir / "out");
  options.preset = model_preset::one_b;
  options.tokenizer_dir = dir / "tok";
  EXPECT_EQ(error_of([&] { make_model(options); }),
            "the tokenizer has 200001 tokens, more than the preset's vocabulary of 128256");
}

TEST(MakeModel, MalformedTokenizerJsonIsAClearError) {
  temp_dir dir;
  std::filesystem::create_directories(dir / "tok");
  make_model_options options = tiny_options(dir / "out");
  options.tokenizer_dir = dir / "tok";
  write_file(dir / "tok/tokenizer.json", R"({"model": {"vocab": {"a": 1}}})");
  EXPECT_THAT(error_of([&] { make_model(options); }), ::testing::StartsWith("tokenizer.json: unexpected structure"));
  write_file(dir / "tok/tokenizer.json", R"({"added_tokens": [], "model": {"vocab": {"a": "one"}}})");
  EXPECT_THAT(error_of([&] { make_model(options); }), ::testing::StartsWith("tokenizer.json: unexpected structure"));
  write_file(dir / "tok/tokenizer.json", R"({"added_tokens": [], "model": {"vocab": {"a": 1}}})");
  write_file(dir / "tok/tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_EQ(error_of([&] { make_model(options); }), "tokenizer_config.json: eos_token '</s>' is not in tokenizer.json");
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
}

TEST(MakeModel, WritesGenerationConfigAndTokenizerFiles) {
  temp_dir dir;
  make_model(tiny_options(dir / "out"));
  const checkpoint opened = checkpoint::open(dir / "out", {.show_progress = false});
  const boost::json::value tokenizer_config = boost::json::parse(read_file(dir / "out/tokenizer_config.json"));
  EXPECT_EQ(tokenizer_config.at("chat_template").as_string(), builtin_chat_template());
  EXPECT_EQ(tokenizer_config.at("eos_token").as_string(), "<|eot_id|>");
  const builtin_tokenizer builtin = make_builtin_tokenizer(8192);
  EXPECT_EQ(read_file(dir / "out/tokenizer.json"), builtin.tokenizer_json);
  EXPECT_EQ(opened.generation().bos_token_id, builtin.begin_of_text_id);
  EXPECT_EQ(opened.generation().eos_token_ids, (std::vector<std::int64_t>{builtin.end_of_text_id, builtin.eot_id}));
  EXPECT_FALSE(opened.generation().do_sample.has_value());  // greedy unless a request asks otherwise
}

TEST(PythonJson, FloatsPrintLikePythonRepr) {
  EXPECT_EQ(python_float_repr(1e-06), "1e-06");
  EXPECT_EQ(python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.02), "0.02");
  EXPECT_EQ(python_float_repr(500000.0), "500000.0");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(python_float_repr(-2.5e-07), "-2.5e-07");
  EXPECT_EQ(python_float_repr(123.456), "123.456");
  EXPECT_EQ(python_float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(python_float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(python_float_repr(0.0), "0.0");
}

TEST(PythonJson, LayoutMatchesJsonDumpsIndent2) {
  const boost::json::value value =
      boost::json::parse(R"({"b": [1, {"d": null, "c": true}], "a": "é\n", "e": [], "f": {}})");
  EXPECT_EQ(to_python_json(value),
            "{\n  \"a\": \"\\u00e9\\n\",\n  \"b\": [\n    1,\n    {\n      \"c\": true,\n"
            "      \"d\": null\n    }\n  ],\n  \"e\": [],\n  \"f\": {}\n}");
  EXPECT_EQ(to_python_json(boost::json::parse(R"({"z": "é", "a": 1})"), {.sort_keys = false, .ensure_ascii = false}),
            "{\n  \"z\": \"é\",\n  \"a\": 1\n}");
}

}  // namespace
}  // namespace troupe
