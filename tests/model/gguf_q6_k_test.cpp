// GGUF Q6_K matrices kept as int6 stored codes (model/gguf_stored_codes.hpp):
// the source's codes and block factors give the gguf package's own floats
// (tests/fixtures/gguf/quant_blocks.json) and the file's expansion exactly,
// read_rows refuses them, a checkpoint counts them at 6.5625 bits a weight,
// and a file of mostly Q6_K matrices runs as int6 under `auto`. None of
// this needs the backend's int6 kernels.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/row_source.hpp"
#include "kernels/stored_code_source.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf_model.hpp"
#include "model/gguf_stored_codes.hpp"
#include "tests/model/gguf_test_util.hpp"
#include "tests/model/model_test_util.hpp"
#include "tests/model/quant_block_reference.hpp"

namespace troupe {
namespace {

const std::filesystem::path fixtures = std::filesystem::path(TROUPE_FIXTURES_DIR) / "gguf";
constexpr std::size_t q6_k_block_bytes = 210;

// Each weight from the source's code and factors, d·s in f32 times q − 32
// (as gguf's dequantiser computes it), is the package's float exactly: a
// code, bit pair or scale read from the wrong place is off by a step.
TEST(Q6_KSource, CodesAndFactorsAreTheGgufPackagesFloatsExactly) {
  ASSERT_EQ(gguf_stored_code_format(ggml_type::q6_k), weight_quantization::int6);
  const testing::reference_blocks reference = testing::quant_block_reference("Q6_K");
  const gguf_tensor tensor = testing::one_block_rows(ggml_type::q6_k, q6_k_block_bytes, reference.bytes);
  const std::int64_t rows = static_cast<std::int64_t>(tensor.dims[1]);
  ASSERT_EQ(rows, 3);
  ASSERT_EQ(reference.values.size(), static_cast<std::size_t>(rows * 256));
  const auto source = gguf_stored_code_source(tensor, 0);
  const testing::half_group_rows read = testing::read_one_block_rows(*source, weight_quantization::int6, rows);
  const std::vector<std::uint8_t>&codes = read.codes, &scale_codes = read.scale_codes;
  const std::vector<std::uint16_t>& block_scales = read.block_scales;
  int nonzero = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t k = 0; k < 256; ++k) {
      const auto at = static_cast<std::size_t>(r * 256 + k);
      ASSERT_LT(codes[at], 64) << at;
      const float scale =
          f16_to_float(block_scales[static_cast<std::size_t>(r)]) *
          static_cast<float>(static_cast<std::int8_t>(scale_codes[static_cast<std::size_t>(r * 16 + k / 16)]));
      ASSERT_EQ(scale * static_cast<float>(codes[at] - 32), reference.values[at]) << "row " << r << ", input " << k;
      ASSERT_EQ(stored_code_value(weight_quantization::int6, codes[at], scale, 0.0f), reference.values[at]) << at;
      nonzero += reference.values[at] != 0.0f;
    }
  }
  EXPECT_GT(nonzero, 700) << "random blocks";
  // Row 1 alone reads the second block.
  std::vector<std::uint8_t> row_codes(256);
  source->read_codes(1, 1, row_codes.data());
  EXPECT_TRUE(std::equal(row_codes.begin(), row_codes.end(), codes.begin() + 256));
}

// Per-16 scales do not fit read_rows' f16 scales per 32: a caller's mistake, not the file's.
TEST(Q6_KSource, ReadRowsIsRefusedAsALogicError) {
  const testing::reference_blocks reference = testing::quant_block_reference("Q6_K");
  const auto source =
      gguf_stored_code_source(testing::one_block_rows(ggml_type::q6_k, q6_k_block_bytes, reference.bytes), 0);
  std::vector<std::uint8_t> codes(256);
  std::vector<std::uint16_t> scales(8), offsets(8);
  EXPECT_THROW(source->read_rows(0, 1, codes.data(), scales.data(), offsets.data()), std::logic_error);
}

// The Q4_K_M fixture keeps its Q6_K attn_v and ffn_down as int6, and
// decode_stored_code_rows (what a backend without int6 kernels reads them
// through) gives the file's own expansion.
TEST(Q6_KSource, AQ4_KMFilesQ6_KMatricesDecodeToTheFilesExpansion) {
  const checkpoint kept =
      checkpoint::open(fixtures / "llama_k256_q4_k_m.gguf", {.show_progress = false, .keep_stored_codes = true});
  int q6_k = 0;
  for (const gguf_tensor& tensor : kept.gguf()->tensors()) {
    const auto name = gguf_hf_tensor_name(tensor.name);
    if (!name || !name->ends_with("_proj.weight") || tensor.type != ggml_type::q6_k) continue;
    const host_tensor* loaded = kept.find_tensor(*name);
    ASSERT_NE(loaded->stored_codes, nullptr) << *name;
    EXPECT_EQ(loaded->data, nullptr) << *name;
    EXPECT_EQ(loaded->stored_codes->format(), weight_quantization::int6) << *name;
    testing::expect_decoded_like_the_expansion(*loaded->stored_codes, tensor, 0);
    ++q6_k;
  }
  EXPECT_EQ(q6_k, 4);  // v and down of both layers
}

// Kept matrices count as the backend holds them: Q4_K at 4 bits and a byte
// of scale and of offset a group of 32 under an f16 each per 256 (4.625
// bits a weight); Q6_K at 6 bits and a byte a group of 16 under an f16 per
// 256 (6.5625).
TEST(Q6_KSource, CheckpointWeightBytesCountQ6_KAsInt6) {
  const auto file = fixtures / "llama_k256_q4_k_m.gguf";
  const checkpoint kept = checkpoint::open(file, {.show_progress = false, .keep_stored_codes = true});
  const checkpoint expanded = checkpoint::open(file, {.show_progress = false});
  std::uint64_t saved = 0;
  int int6 = 0;
  for (const layer_weights& layer : kept.weights().layers) {
    for (const host_tensor* t :
         {layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj, layer.gate_proj, layer.up_proj, layer.down_proj}) {
      ASSERT_NE(t->stored_codes, nullptr) << t->name;
      const auto w = static_cast<std::uint64_t>(t->numel());
      const bool six_bits = t->stored_codes->format() == weight_quantization::int6;
      const std::uint64_t as_kept = six_bits ? w * 6 / 8 + w / 16 + w / 256 * 2 : w / 2 + 2 * (w / 32 + w / 256 * 2);
      saved += expanded.find_tensor(t->name)->byte_size() - as_kept;
      int6 += six_bits;
    }
  }
  EXPECT_EQ(int6, 4);
  EXPECT_EQ(expanded.weight_bytes() - kept.weight_bytes(), saved);
}

// A one-layer Llama of hidden size 256 (one head) whose seven layer
// matrices are Q6_K, the reference blocks in turn with each row's d its
// own (so rows differ), the rest F32.
std::string mostly_q6_k_file(const testing::reference_blocks& reference) {
  const std::vector<testing::gguf_kv> kvs = {testing::kv_string("general.architecture", "llama"),
                                             testing::kv_u32("llama.block_count", 1),
                                             testing::kv_u32("llama.embedding_length", 256),
                                             testing::kv_u32("llama.feed_forward_length", 256),
                                             testing::kv_u32("llama.attention.head_count", 1),
                                             testing::kv_u32("llama.context_length", 64),
                                             testing::kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)};
  std::vector<testing::gguf_tensor_entry> entries;
  std::string data;
  const auto add = [&](const std::string& name, std::vector<std::uint64_t> dims, std::uint32_t type,
                       const std::string& bytes) {
    entries.push_back({name, std::move(dims), type, data.size()});
    data += bytes;
    data.resize((data.size() + 31) / 32 * 32, '\0');
  };
  add("token_embd.weight", {256, 8}, 0, testing::f32_bytes(std::vector<float>(8 * 256, 0.01f)));
  for (const char* norm : {"output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"})
    add(norm, {256}, 0, testing::f32_bytes(std::vector<float>(256, 1.0f)));
  std::string matrix;
  for (std::size_t row = 0; row < 256; ++row) {
    const std::size_t block = row % (reference.bytes.size() / q6_k_block_bytes);
    std::string bytes(reinterpret_cast<const char*>(reference.bytes.data()) + block * q6_k_block_bytes,
                      q6_k_block_bytes);
    const std::uint16_t d = float_to_f16(0.001f * static_cast<float>(row + 1));
    std::memcpy(bytes.data() + 208, &d, 2);
    matrix += bytes;
  }
  for (const char* name : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
    add(std::string("blk.0.") + name + ".weight", {256, 256}, 14, matrix);
  return testing::gguf_bytes(kvs, entries, data);
}

// `auto` keeps a mostly-Q6_K file's codes and runs it as int6 (no longer
// int8); q and k come back in HF row order as any GGUF source's do; int8
// asked for streams the rows to be requantised instead.
TEST(Q6_KSource, AMostlyQ6_KFileRunsAsInt6) {
  const testing::temp_dir dir;
  testing::write_file(dir / "q6_k.gguf", mostly_q6_k_file(testing::quant_block_reference("Q6_K")));
  const quantized_checkpoint opened = open_for_quantization(dir / "q6_k.gguf", "auto", true, {.show_progress = false});
  EXPECT_EQ(opened.quantization, weight_quantization::int6);
  EXPECT_EQ(opened.weights.stored_quantization(), weight_quantization::int6);
  const layer_weights& layer = opened.weights.weights().layers.at(0);
  for (const host_tensor* t :
       {layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj, layer.gate_proj, layer.up_proj, layer.down_proj}) {
    ASSERT_NE(t->stored_codes, nullptr) << t->name;
    EXPECT_EQ(t->stored_codes->format(), weight_quantization::int6) << t->name;
  }
  // One head of 256 rows: HF row (s, i) is file row 2 i + s.
  const gguf_tensor& q = *opened.weights.gguf()->find_tensor("blk.0.attn_q.weight");
  testing::expect_decoded_like_the_expansion(*layer.q_proj->stored_codes, q, 1);
  std::vector<float> hf_row_1(256), file_row_2(256);
  decode_stored_code_rows(*layer.q_proj->stored_codes, 1, 1, 256, hf_row_1.data());
  gguf_row_source(q, 0)->read_rows(2, 1, file_row_2.data());
  EXPECT_EQ(hf_row_1, file_row_2);

  const quantized_checkpoint int8 = open_for_quantization(dir / "q6_k.gguf", "int8", true, {.show_progress = false});
  EXPECT_EQ(int8.quantization, weight_quantization::int8);
  EXPECT_EQ(int8.weights.weights().layers.at(0).v_proj->stored_codes, nullptr);
  EXPECT_NE(int8.weights.weights().layers.at(0).v_proj->rows, nullptr);
  EXPECT_EQ(int8.weights.weights().layers.at(0).v_proj->stored_bits, 6);
  // No quantised kernels: expanded and run as stored.
  EXPECT_EQ(open_for_quantization(dir / "q6_k.gguf", "auto", false, {.show_progress = false}).quantization,
            weight_quantization::none);
}

}  // namespace
}  // namespace troupe
