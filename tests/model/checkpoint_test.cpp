// Opening model directories: checkpoints saved by transformers, checkpoints
// from make_model (every architecture and dtype, single and sharded), and
// hostile directories.

#include "model/checkpoint.hpp"

#include <boost/json.hpp>
#include <cstring>
#include <set>

#include "model/make_model.hpp"
#include "model/random_weights.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::temp_dir;
using testing::write_file;

std::filesystem::path hf_fixture(const std::string& name) {
  return std::filesystem::path(TROUPE_FIXTURES_DIR) / "model/hf_tiny" / name;
}

double element(const host_tensor& tensor, std::int64_t i) {
  const char* base = static_cast<const char*>(tensor.data);
  if (tensor.type == dtype::f32) {
    float value;
    std::memcpy(&value, base + 4 * i, 4);
    return value;
  }
  std::uint16_t bits;
  std::memcpy(&bits, base + 2 * i, 2);
  return tensor.type == dtype::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
}

// Every tensor model_weights points at.
std::set<const host_tensor*> bound_tensors(const model_weights& weights) {
  std::set<const host_tensor*> out = {weights.embed_tokens, weights.final_norm, weights.lm_head};
  for (const layer_weights& l : weights.layers) {
    for (const host_tensor* t :
         {l.q_proj, l.k_proj, l.v_proj, l.o_proj, l.q_bias, l.k_bias, l.v_bias, l.o_bias, l.q_norm, l.k_norm,
          l.gate_proj, l.up_proj, l.down_proj, l.input_norm, l.post_attention_norm}) {
      if (t != nullptr) out.insert(t);
    }
  }
  return out;
}

class HfCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(HfCheckpoint, EveryTensorMatchesWhatTorchSaved) {
  const checkpoint opened = checkpoint::open(hf_fixture(GetParam()), {.show_progress = false});
  const boost::json::value expected = boost::json::parse(testing::read_file(hf_fixture(GetParam()) / "expected.json"));
  std::set<const host_tensor*> listed;
  for (const auto& [key, entry] : expected.as_object()) {
    const std::string name(key);
    const host_tensor* tensor = opened.find_tensor(name);
    ASSERT_NE(tensor, nullptr) << name;
    listed.insert(tensor);
    const std::string type(entry.at("dtype").as_string());
    EXPECT_EQ(tensor->type, *parse_dtype(type)) << name;
    std::vector<std::int64_t> shape;
    for (const auto& dim : entry.at("shape").as_array()) shape.push_back(dim.to_number<std::int64_t>());
    EXPECT_EQ(tensor->shape, shape) << name;
    double sum = 0.0;
    for (std::int64_t i = 0; i < tensor->numel(); ++i) sum += element(*tensor, i);
    EXPECT_NEAR(sum, entry.at("sum").to_number<double>(), 1e-9 * (1.0 + std::abs(sum))) << name;
    const auto& first = entry.at("first").as_array();
    for (std::size_t i = 0; i < first.size(); ++i) {
      // Compared as float: every stored type widens exactly to float, and Boost.JSON 1.81 may
      // parse a 17-digit decimal one double ulp off.
      EXPECT_EQ(static_cast<float>(element(*tensor, static_cast<std::int64_t>(i))), first[i].to_number<float>())
          << name << "[" << i << "]";
    }
  }
  // The structured view covers exactly the tensors transformers saved.
  EXPECT_EQ(bound_tensors(opened.weights()), listed);
}

INSTANTIATE_TEST_SUITE_P(Transformers, HfCheckpoint,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "llama_sharded"));

TEST(Checkpoint, StructuredWeightsFollowTheArchitecture) {
  const checkpoint llama = checkpoint::open(hf_fixture("llama"), {.show_progress = false});
  EXPECT_EQ(llama.weights().lm_head, llama.weights().embed_tokens);  // tied
  EXPECT_EQ(llama.weights().layers.size(), 2u);
  EXPECT_EQ(llama.weights().layers[1].k_proj, llama.find_tensor("model.layers.1.self_attn.k_proj.weight"));
  EXPECT_EQ(llama.weights().layers[0].q_bias, nullptr);
  EXPECT_EQ(llama.files().size(), 1u);

  const checkpoint qwen2 = checkpoint::open(hf_fixture("qwen2"), {.show_progress = false});
  EXPECT_NE(qwen2.weights().lm_head, qwen2.weights().embed_tokens);
  EXPECT_EQ(qwen2.weights().layers[0].v_bias, qwen2.find_tensor("model.layers.0.self_attn.v_proj.bias"));
  EXPECT_EQ(qwen2.weights().layers[0].o_bias, nullptr);

  const checkpoint qwen3 = checkpoint::open(hf_fixture("qwen3"), {.show_progress = false});
  EXPECT_EQ(qwen3.weights().layers[1].q_norm, qwen3.find_tensor("model.layers.1.self_attn.q_norm.weight"));
  EXPECT_EQ(qwen3.weights().layers[1].q_norm->shape, std::vector<std::int64_t>{16});

  const checkpoint sharded = checkpoint::open(hf_fixture("llama_sharded"), {.show_progress = false, .prefetch = true});
  EXPECT_EQ(sharded.files().size(), 3u);
}

struct make_case {
  model_architecture arch;
  dtype type;
};

class MadeCheckpoint : public ::testing::TestWithParam<make_case> {};

// Names under model.layers.0. in a checkpoint directory's tensors.
std::set<std::string> layer_zero_names(const checkpoint& opened, const std::vector<std::string>& names) {
  std::set<std::string> out;
  for (const std::string& name : names) {
    if (name.starts_with("model.layers.0.") && opened.find_tensor(name) != nullptr) out.insert(name);
  }
  return out;
}

std::vector<std::string> all_names(const checkpoint& opened) {
  std::vector<std::string> names;
  for (const safetensors_file& file : opened.files()) {
    for (const host_tensor& tensor : file.tensors()) names.push_back(tensor.name);
  }
  return names;
}

TEST_P(MadeCheckpoint, TinyPresetLoadsWithTheShapesOfThePreset) {
  const make_case c = GetParam();
  temp_dir dir;
  make_model_options options;
  options.architecture = c.arch;
  options.type = c.type;
  options.seed = 3;
  options.output_dir = dir / "model";
  options.show_progress = false;
  make_model(options);
  const checkpoint opened = checkpoint::open(options.output_dir, {.show_progress = false});
  const model_config& config = opened.config();
  EXPECT_EQ(config.architecture, c.arch);
  EXPECT_EQ(config.hidden_size, 128);
  EXPECT_EQ(config.num_hidden_layers, 4);
  EXPECT_EQ(config.num_attention_heads, 4);
  EXPECT_EQ(config.num_key_value_heads, 2);
  EXPECT_EQ(config.head_dim, 32);
  EXPECT_EQ(config.vocab_size % 64, 0);
  EXPECT_EQ(config.torch_dtype, c.type);
  const model_weights& w = opened.weights();
  EXPECT_EQ(w.embed_tokens->shape, (std::vector<std::int64_t>{config.vocab_size, 128}));
  EXPECT_EQ(w.lm_head == w.embed_tokens, c.arch != model_architecture::mistral);
  for (const layer_weights& layer : w.layers) {
    EXPECT_EQ(layer.q_proj->shape, (std::vector<std::int64_t>{128, 128}));
    EXPECT_EQ(layer.k_proj->shape, (std::vector<std::int64_t>{64, 128}));
    EXPECT_EQ(layer.o_proj->shape, (std::vector<std::int64_t>{128, 128}));
    EXPECT_EQ(layer.gate_proj->shape, (std::vector<std::int64_t>{384, 128}));
    EXPECT_EQ(layer.down_proj->shape, (std::vector<std::int64_t>{128, 384}));
    EXPECT_EQ(layer.k_bias != nullptr, c.arch == model_architecture::qwen2);
    EXPECT_EQ(layer.k_norm != nullptr, c.arch == model_architecture::qwen3);
  }
  for (const host_tensor* tensor : bound_tensors(w)) EXPECT_EQ(tensor->type, c.type) << tensor->name;
  // Same per-layer tensor names as the checkpoint transformers saved for this architecture.
  const std::string arch_name(architecture_model_type(c.arch));
  const checkpoint reference = checkpoint::open(hf_fixture(arch_name), {.show_progress = false});
  EXPECT_EQ(layer_zero_names(opened, all_names(opened)), layer_zero_names(reference, all_names(reference)));
  EXPECT_EQ(all_names(opened).size(), bound_tensors(w).size());
}

INSTANTIATE_TEST_SUITE_P(
    EveryArchAndDtype, MadeCheckpoint,
    ::testing::Values(
        make_case{model_architecture::llama, dtype::f32}, make_case{model_architecture::llama, dtype::bf16},
        make_case{model_architecture::llama, dtype::f16}, make_case{model_architecture::mistral, dtype::f32},
        make_case{model_architecture::mistral, dtype::bf16}, make_case{model_architecture::mistral, dtype::f16},
        make_case{model_architecture::qwen2, dtype::f32}, make_case{model_architecture::qwen2, dtype::bf16},
        make_case{model_architecture::qwen2, dtype::f16}, make_case{model_architecture::qwen3, dtype::f32},
        make_case{model_architecture::qwen3, dtype::bf16}, make_case{model_architecture::qwen3, dtype::f16}),
    [](const ::testing::TestParamInfo<make_case>& info) {
      return std::string(architecture_model_type(info.param.arch)) + "_" + std::string(dtype_name(info.param.type));
    });

TEST(Checkpoint, ShardedCheckpointHoldsTheSameTensorsAsASingleFile) {
  temp_dir dir;
  make_model_options options;
  options.architecture = model_architecture::qwen2;
  options.type = dtype::bf16;
  options.seed = 11;
  options.show_progress = false;
  options.output_dir = dir / "single";
  make_model(options);
  options.output_dir = dir / "sharded";
  options.max_shard_bytes = 300'000;
  make_model(options);
  EXPECT_TRUE(std::filesystem::exists(dir / "sharded/model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "sharded/model.safetensors"));
  const checkpoint single = checkpoint::open(dir / "single", {.show_progress = false});
  const checkpoint sharded = checkpoint::open(dir / "sharded", {.show_progress = false});
  EXPECT_GT(sharded.files().size(), 2u);
  for (const safetensors_file& file : sharded.files()) EXPECT_LE(file.file_size(), 300'000u + 8192u);
  const std::vector<std::string> names = all_names(single);
  EXPECT_EQ(names.size(), all_names(sharded).size());
  for (const std::string& name : names) {
    const host_tensor* a = single.find_tensor(name);
    const host_tensor* b = sharded.find_tensor(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(a->shape, b->shape);
    EXPECT_EQ(std::memcmp(a->data, b->data, a->byte_size()), 0) << name;
  }
  EXPECT_EQ(single.weight_bytes(), sharded.weight_bytes());
}

// A small hand-made checkpoint: config.json for a 1-layer Llama and the
// tensors it implies, with `edit` applied to the tensor list first.
void write_checkpoint(const std::filesystem::path& dir, const std::function<void(std::vector<random_tensor>&)>& edit) {
  std::filesystem::create_directories(dir);
  const std::string config_text =
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
          "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 10, "tie_word_embeddings": false})";
  write_file(dir / "config.json", config_text);
  std::vector<random_tensor> tensors = random_checkpoint_tensors(parse_model_config(config_text), dtype::f32);
  edit(tensors);
  write_random_weights(dir, tensors, 1, 1u << 30, {});
}

std::string open_error(const std::filesystem::path& dir) {
  return error_of([&] { checkpoint::open(dir, {.show_progress = false}); });
}

void remove_tensor(std::vector<random_tensor>& tensors, const std::string& name) {
  std::erase_if(tensors, [&](const random_tensor& t) { return t.entry.name == name; });
}

TEST(CheckpointHostile, MissingTensor) {
  temp_dir dir;
  write_checkpoint(dir.path(), [](auto& tensors) { remove_tensor(tensors, "model.norm.weight"); });
  EXPECT_EQ(open_error(dir.path()), dir.path().string() + ": missing tensor 'model.norm.weight'");
}

TEST(CheckpointHostile, MissingLmHeadWhenUntied) {
  temp_dir dir;
  write_checkpoint(dir.path(), [](auto& tensors) { remove_tensor(tensors, "lm_head.weight"); });
  EXPECT_EQ(open_error(dir.path()), dir.path().string() + ": missing tensor 'lm_head.weight'");
}

TEST(CheckpointHostile, WrongShapeForTheConfig) {
  temp_dir dir;
  write_checkpoint(dir.path(), [](auto& tensors) {
    for (random_tensor& t : tensors) {
      if (t.entry.name == "model.layers.0.self_attn.k_proj.weight") t.entry.shape = {16, 16};
    }
  });
  EXPECT_EQ(open_error(dir.path()), dir.path().string() +
                                        ": tensor 'model.layers.0.self_attn.k_proj.weight' has shape [16, 16], "
                                        "expected [8, 16] from config.json");
}

TEST(CheckpointHostile, NoWeightsFile) {
  temp_dir dir;
  write_checkpoint(dir.path(), [](auto&) {});
  std::filesystem::remove(dir / "model.safetensors");
  EXPECT_EQ(open_error(dir.path()), dir.path().string() + ": no model.safetensors or model.safetensors.index.json");
}

TEST(CheckpointHostile, NotADirectory) {
  temp_dir dir;
  EXPECT_EQ(open_error(dir / "absent"),
            (dir / "absent").string() + ": model directory does not exist or is not a directory");
}

// A directory whose index maps every tensor to `shard_name`.
void write_index(const std::filesystem::path& dir, const std::string& shard_name) {
  write_checkpoint(dir, [](auto&) {});
  std::filesystem::rename(dir / "model.safetensors", dir / "weights.safetensors");
  write_file(dir / "model.safetensors.index.json",
             R"({"metadata": {}, "weight_map": {"model.norm.weight": ")" + shard_name + R"("}})");
}

TEST(CheckpointHostile, ShardNameWithParentDirectory) {
  temp_dir dir;
  write_index(dir / "m", "../weights.safetensors");
  EXPECT_EQ(open_error(dir / "m"),
            "model.safetensors.index.json: shard name '../weights.safetensors' escapes the model directory");
  write_index(dir / "n", "sub/../../x.safetensors");
  EXPECT_THAT(open_error(dir / "n"), HasSubstr("shard name 'sub/../../x.safetensors' escapes the model directory"));
}

TEST(CheckpointHostile, AbsoluteShardName) {
  temp_dir dir;
  write_index(dir.path(), (dir / "weights.safetensors").string());
  EXPECT_EQ(open_error(dir.path()), "model.safetensors.index.json: shard name '" +
                                        (dir / "weights.safetensors").string() + "' escapes the model directory");
}

TEST(CheckpointHostile, IndexNamesAShardWithoutTheTensor) {
  temp_dir dir;
  write_checkpoint(dir.path(), [](auto&) {});
  std::filesystem::rename(dir / "model.safetensors", dir / "a.safetensors");
  write_file(dir / "model.safetensors.index.json",
             R"({"weight_map": {"model.norm.weight": "a.safetensors", "model.extra.weight": "a.safetensors"}})");
  EXPECT_EQ(open_error(dir.path()),
            "model.safetensors.index.json: tensor 'model.extra.weight' is mapped to 'a.safetensors', which does not "
            "contain it");
}

TEST(CheckpointHostile, MalformedIndex) {
  temp_dir dir;
  write_checkpoint(dir.path(), [](auto&) {});
  std::filesystem::remove(dir / "model.safetensors");
  write_file(dir / "model.safetensors.index.json", R"({"weight_map": {"model.norm.weight": 3}})");
  EXPECT_EQ(
      open_error(dir.path()),
      "model.safetensors.index.json: field 'weight_map.model.norm.weight' must be a shard file name, got integer");
  write_file(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_EQ(open_error(dir.path()), "model.safetensors.index.json: field 'weight_map' is missing");
}

TEST(CheckpointHostile, MissingShardFile) {
  temp_dir dir;
  write_index(dir.path(), "absent.safetensors");
  EXPECT_THAT(open_error(dir.path()), HasSubstr("absent.safetensors: cannot open"));
}

TEST(CheckpointHostile, BadSafetensorsErrorNamesFileAndTensor) {
  temp_dir dir;
  write_checkpoint(dir.path(), [](auto&) {});
  write_file(dir / "model.safetensors",
             testing::raw_safetensors(R"({"model.norm.weight":{"dtype":"F64","shape":[16],"data_offsets":[0,128]}})",
                                      std::string(128, '\0')));
  EXPECT_EQ(open_error(dir.path()),
            "model.safetensors: tensor 'model.norm.weight': unsupported dtype F64 (supported: BF16, F16, F32)");
}

TEST(CheckpointHostile, UnsupportedArchitectureNamesConfig) {
  temp_dir dir;
  write_checkpoint(dir.path(), [](auto&) {});
  write_file(dir / "config.json", R"({"architectures": ["MixtralForCausalLM"]})");
  EXPECT_THAT(open_error(dir.path()), HasSubstr("config.json: unsupported architecture 'MixtralForCausalLM'"));
}

}  // namespace
}  // namespace troupe
