// GGUF tensors into model weights: the block dequantisers against the gguf
// package's own (tests/fixtures/gguf/quant_blocks.json), and a one-layer
// model built byte by byte for the RoPE row permutation, the element type
// chosen, and every way its metadata or tensors can be wrong.

#include <boost/json.hpp>
#include <cmath>

#include "model/checkpoint.hpp"
#include "model/gguf_dequantize.hpp"
#include "tests/model/gguf_test_util.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using namespace testing;  // NOLINT: the byte builders
using ::testing::HasSubstr;

TEST(GgufDequantize, BlocksExpandLikeTheGgufPackage) {
  const auto blocks =
      boost::json::parse(read_file(std::filesystem::path(TROUPE_FIXTURES_DIR) / "gguf/quant_blocks.json")).as_object();
  const std::map<std::string, ggml_type> types = {
      {"Q8_0", ggml_type::q8_0},     {"Q4_0", ggml_type::q4_0}, {"Q4_1", ggml_type::q4_1},
      {"Q4_K", ggml_type::q4_k},     {"Q6_K", ggml_type::q6_k}, {"Q5_0", ggml_type::q5_0},
      {"Q5_1", ggml_type::q5_1},     {"Q5_K", ggml_type::q5_k}, {"IQ4_NL", ggml_type::iq4_nl},
      {"IQ4_XS", ggml_type::iq4_xs}, {"Q2_K", ggml_type::q2_k}, {"Q3_K", ggml_type::q3_k}};
  for (const auto& [name, type] : types) {
    const auto& entry = blocks.at(name).as_object();
    const std::string hex(entry.at("hex").as_string());
    std::vector<std::byte> bytes;
    for (std::size_t i = 0; i < hex.size(); i += 2)
      bytes.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    const auto& expected = entry.at("values").as_array();
    ASSERT_EQ(bytes.size() / ggml_block_bytes(type) * ggml_block_elements(type), expected.size()) << name;
    std::vector<float> out(expected.size());
    gguf_dequantize(type, bytes.data(), out.data(), out.size());
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], expected[i].to_number<double>(), 1e-6 * (1 + std::abs(out[i]))) << name << "[" << i << "]";
  }
}

// A one-layer llama: hidden 4, one head of 4, FFN 8, vocab 8, F32 tensors
// whose element k of row r is r + k / 100 (rows counted in the file).
struct tiny_model {
  std::vector<gguf_kv> kvs = {kv_string("general.architecture", "llama"),
                              kv_u32("llama.block_count", 1),
                              kv_u32("llama.embedding_length", 4),
                              kv_u32("llama.feed_forward_length", 8),
                              kv_u32("llama.attention.head_count", 1),
                              kv_u32("llama.context_length", 64),
                              kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)};
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> tensors = {
      {"token_embd.weight", {4, 8}},        {"output_norm.weight", {4}},      {"blk.0.attn_norm.weight", {4}},
      {"blk.0.attn_q.weight", {4, 4}},      {"blk.0.attn_k.weight", {4, 4}},  {"blk.0.attn_v.weight", {4, 4}},
      {"blk.0.attn_output.weight", {4, 4}}, {"blk.0.ffn_norm.weight", {4}},   {"blk.0.ffn_gate.weight", {4, 8}},
      {"blk.0.ffn_up.weight", {4, 8}},      {"blk.0.ffn_down.weight", {8, 4}}};

  std::string bytes() const {
    std::vector<gguf_tensor_entry> entries;
    std::string data;
    for (const auto& [name, dims] : tensors) {
      entries.push_back({name, dims, 0, data.size()});
      const std::uint64_t cols = dims[0], rows = dims.size() > 1 ? dims[1] : 1;
      std::vector<float> values;
      for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t k = 0; k < cols; ++k) values.push_back(static_cast<float>(r) + static_cast<float>(k) / 100);
      data += f32_bytes(values);
      data.resize((data.size() + 31) / 32 * 32, '\0');
    }
    return gguf_bytes(kvs, entries, data);
  }
  void set(const gguf_kv& kv) {
    for (gguf_kv& existing : kvs)
      if (existing.key == kv.key) existing = kv;
  }
  void drop(const std::string& key) {
    std::erase_if(kvs, [&](const gguf_kv& kv) { return kv.key == key; });
    std::erase_if(tensors, [&](const auto& t) { return t.first == key; });
  }
};

std::string open_error(const tiny_model& model) {
  temp_dir dir;
  write_file(dir / "m.gguf", model.bytes());
  return error_of([&] { checkpoint::open(dir / "m.gguf", {.show_progress = false}); });
}

TEST(GgufLoading, OneLayerModelLoadsWithQkRowsBackInHfOrder) {
  temp_dir dir;
  write_file(dir / "m.gguf", tiny_model{}.bytes());
  const checkpoint model = checkpoint::open(dir / "m.gguf", {.show_progress = false});
  EXPECT_EQ(model.config().hidden_size, 4);
  EXPECT_EQ(model.config().num_key_value_heads, 1);
  EXPECT_EQ(model.config().vocab_size, 8);
  EXPECT_EQ(model.config().max_context_length, 64);
  EXPECT_TRUE(model.config().tie_word_embeddings);
  EXPECT_EQ(model.config().torch_dtype, dtype::f32);
  EXPECT_EQ(model.weights().lm_head, model.weights().embed_tokens);
  const layer_weights& layer = model.weights().layers.at(0);
  EXPECT_EQ(layer.gate_proj->shape, (std::vector<std::int64_t>{8, 4}));
  EXPECT_EQ(layer.down_proj->shape, (std::vector<std::int64_t>{4, 8}));
  // File rows interleave the RoPE halves: HF row (s, i) is file row 2i + s.
  for (const host_tensor* t : {layer.q_proj, layer.k_proj}) {
    const float* rows = static_cast<const float*>(t->data);
    EXPECT_EQ(std::vector<float>({rows[0], rows[4], rows[8], rows[12]}), std::vector<float>({0, 2, 1, 3})) << t->name;
    EXPECT_FLOAT_EQ(rows[5], 2.01f);
  }
  const float* v = static_cast<const float*>(layer.v_proj->data);
  EXPECT_EQ(std::vector<float>({v[0], v[4], v[8], v[12]}), std::vector<float>({0, 1, 2, 3}));
  EXPECT_EQ(model.gguf()->find_tensor("blk.0.attn_v.weight")->data, layer.v_proj->data);  // a view, not a copy
}

TEST(GgufLoading, MissingOrMistypedMetadataNamesTheKey) {
  tiny_model no_layers;
  no_layers.drop("llama.block_count");
  EXPECT_EQ(open_error(no_layers), "m.gguf: metadata key 'llama.block_count': is missing");
  tiny_model text_layers;
  text_layers.set(kv_string("llama.block_count", "one"));
  EXPECT_EQ(open_error(text_layers), "m.gguf: metadata key 'llama.block_count': must be an integer, got string");
  tiny_model gemma;
  gemma.set(kv_string("general.architecture", "gemma"));
  EXPECT_THAT(open_error(gemma), HasSubstr("'general.architecture': 'gemma' is not supported"));
  tiny_model no_arch;
  no_arch.drop("general.architecture");
  EXPECT_THAT(open_error(no_arch), HasSubstr("'general.architecture': is missing"));
  tiny_model bad_heads;
  bad_heads.kvs.push_back(kv_u32("llama.attention.head_count_kv", 3));
  EXPECT_THAT(open_error(bad_heads), HasSubstr("m.gguf (config from metadata): field 'num_key_value_heads'"));
  tiny_model split;
  split.kvs.push_back(kv_u32("split.count", 3));
  EXPECT_THAT(open_error(split), HasSubstr("'split.count': 3: split GGUF files are not supported"));
  tiny_model partial;
  partial.kvs.push_back(kv_u32("llama.rope.dimension_count", 2));
  EXPECT_THAT(open_error(partial), HasSubstr("'llama.rope.dimension_count': 2 is not the head size 4"));
  tiny_model experts;
  experts.kvs.push_back(kv_u32("llama.expert_count", 8));
  EXPECT_THAT(open_error(experts), HasSubstr("'llama.expert_count': mixture-of-experts models are not supported"));
  tiny_model yarn;
  yarn.kvs.push_back(kv_string("llama.rope.scaling.type", "yarn"));
  EXPECT_THAT(open_error(yarn), HasSubstr("'llama.rope.scaling.type': 'yarn' is not supported"));
}

TEST(GgufLoading, MissingOrMisshapenTensorsAreClearErrors) {
  tiny_model no_up;
  no_up.drop("blk.0.ffn_up.weight");
  EXPECT_THAT(open_error(no_up), HasSubstr("m.gguf: missing tensor 'model.layers.0.mlp.up_proj.weight'"));
  tiny_model no_embeddings;
  no_embeddings.drop("token_embd.weight");
  EXPECT_THAT(open_error(no_embeddings), HasSubstr("m.gguf: missing tensor 'token_embd.weight'"));
  tiny_model wide_v;
  wide_v.tensors[5].second = {4, 6};
  EXPECT_THAT(open_error(wide_v), HasSubstr("has shape [6, 4], expected [4, 4] from the GGUF metadata"));
  tiny_model odd_q;
  odd_q.tensors[3].second = {4, 3};
  EXPECT_THAT(open_error(odd_q), HasSubstr("m.gguf: tensor 'blk.0.attn_q.weight': 3 rows do not split into 1 heads"));
  tiny_model bad_rope;
  bad_rope.tensors.push_back({"rope_freqs.weight", {3}});
  EXPECT_THAT(open_error(bad_rope), HasSubstr("tensor 'rope_freqs.weight': must be 2 F32 values"));
  tiny_model odd_rope;
  odd_rope.tensors.push_back({"rope_freqs.weight", {2}});  // divisors 0 and 0.01: no llama3 scaling gives those
  EXPECT_THAT(open_error(odd_rope), HasSubstr("no Llama 3 rope scaling reproduces"));
}

}  // namespace
}  // namespace troupe
