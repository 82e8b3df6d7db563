// GGUF Q3_K matrices kept as int4_g16 stored codes (model/gguf_stored_codes.hpp):
// the source's codes and block factors give the gguf package's own floats
// (tests/fixtures/gguf/quant_blocks.json) and the files' expansion exactly,
// read_rows refuses them, a checkpoint counts them at 4.5625 bits a weight,
// and `auto` keeps a Q3_K_M file's Q3_K matrices as int4_g16. None of this
// needs the backend's int4_g16 kernels.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/row_source.hpp"
#include "kernels/stored_code_source.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf_model.hpp"
#include "model/gguf_stored_codes.hpp"
#include "tests/model/model_test_util.hpp"
#include "tests/model/quant_block_reference.hpp"

namespace troupe {
namespace {

const std::filesystem::path fixtures = std::filesystem::path(TROUPE_FIXTURES_DIR) / "gguf";
const std::filesystem::path q2_k = fixtures / "llama_k256_q2_k.gguf";
const std::filesystem::path q3_k_m = fixtures / "llama_k256_q3_k_m.gguf";
constexpr std::size_t q3_k_block_bytes = 110;

// Each weight from the source's code and factors, d·(s − 32) in f32 times
// code − 8 (as gguf's dequantiser computes d·(s − 32) · q), is the
// package's float exactly: a high bit, bit pair or scale read from the
// wrong place is off by a step.
TEST(Q3_KSource, CodesAndFactorsAreTheGgufPackagesFloatsExactly) {
  ASSERT_EQ(gguf_stored_code_format(ggml_type::q3_k), weight_quantization::int4_g16);
  const testing::reference_blocks reference = testing::quant_block_reference("Q3_K");
  const gguf_tensor tensor = testing::one_block_rows(ggml_type::q3_k, q3_k_block_bytes, reference.bytes);
  const std::int64_t rows = static_cast<std::int64_t>(tensor.dims[1]);
  ASSERT_EQ(rows, 3);
  ASSERT_EQ(reference.values.size(), static_cast<std::size_t>(rows * 256));
  const auto source = gguf_stored_code_source(tensor, 0);
  const testing::half_group_rows read = testing::read_one_block_rows(*source, weight_quantization::int4_g16, rows);
  const std::vector<std::uint8_t>&codes = read.codes, &scale_codes = read.scale_codes;
  const std::vector<std::uint16_t>& block_scales = read.block_scales;
  for (const std::uint8_t scale_code : scale_codes) {
    const auto s = static_cast<std::int8_t>(scale_code);
    ASSERT_TRUE(s >= -32 && s <= 31) << int{s};  // a 6-bit scale less 32
  }
  int nonzero = 0;
  std::set<int> seen;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t k = 0; k < 256; ++k) {
      const auto at = static_cast<std::size_t>(r * 256 + k);
      // Q3_K's q in −4..3 is code q + 8.
      ASSERT_GE(codes[at], 4) << at;
      ASSERT_LE(codes[at], 11) << at;
      seen.insert(codes[at]);
      const float scale =
          f16_to_float(block_scales[static_cast<std::size_t>(r)]) *
          static_cast<float>(static_cast<std::int8_t>(scale_codes[static_cast<std::size_t>(r * 16 + k / 16)]));
      ASSERT_EQ(scale * static_cast<float>(codes[at] - 8), reference.values[at]) << "row " << r << ", input " << k;
      ASSERT_EQ(stored_code_value(weight_quantization::int4_g16, codes[at], scale, 0.0f), reference.values[at]) << at;
      nonzero += reference.values[at] != 0.0f;
    }
  }
  EXPECT_EQ(seen.size(), 8u) << "random blocks reach every q";
  EXPECT_GT(nonzero, 600) << "random blocks";
  // Row 1 alone reads the second block.
  std::vector<std::uint8_t> row_codes(256);
  source->read_codes(1, 1, row_codes.data());
  EXPECT_TRUE(std::equal(row_codes.begin(), row_codes.end(), codes.begin() + 256));
  std::vector<std::uint8_t> row_scale_codes(16);
  std::uint16_t row_block_scale = 0;
  source->read_block_factors(2, 1, &row_block_scale, nullptr, row_scale_codes.data(), nullptr);
  EXPECT_EQ(row_block_scale, block_scales[2]);
  EXPECT_TRUE(std::equal(row_scale_codes.begin(), row_scale_codes.end(), scale_codes.begin() + 32));
}

// Per-16 scales do not fit read_rows' f16 scales per 32: a caller's mistake, not the file's.
TEST(Q3_KSource, ReadRowsIsRefusedAsALogicError) {
  const testing::reference_blocks reference = testing::quant_block_reference("Q3_K");
  const auto source =
      gguf_stored_code_source(testing::one_block_rows(ggml_type::q3_k, q3_k_block_bytes, reference.bytes), 0);
  std::vector<std::uint8_t> codes(256);
  std::vector<std::uint16_t> scales(8), offsets(8);
  EXPECT_THROW(source->read_rows(0, 1, codes.data(), scales.data(), offsets.data()), std::logic_error);
}

// llama.cpp's own Q3_K matrices (the Q2_K file's v, o and down; the Q3_K_M
// file's q, k, gate and up, whose q and k rows come back in HF order) are
// kept as int4_g16, and decode_stored_code_rows (what a backend without
// int4_g16 kernels reads them through) gives the file's own expansion.
TEST(Q3_KSource, LlamaCppsQ3_KMatricesDecodeToTheFilesExpansion) {
  for (const auto& [file, expected] : {std::pair{q2_k, 6}, std::pair{q3_k_m, 8}}) {
    const checkpoint kept = checkpoint::open(file, {.show_progress = false, .keep_stored_codes = true});
    const model_config& config = kept.config();
    int q3_k = 0;
    for (const gguf_tensor& tensor : kept.gguf()->tensors()) {
      const auto name = gguf_hf_tensor_name(tensor.name);
      if (!name || !name->ends_with("_proj.weight") || tensor.type != ggml_type::q3_k) continue;
      const host_tensor* loaded = kept.find_tensor(*name);
      ASSERT_NE(loaded->stored_codes, nullptr) << *name;
      EXPECT_EQ(loaded->data, nullptr) << *name;
      EXPECT_EQ(loaded->stored_codes->format(), weight_quantization::int4_g16) << *name;
      std::int64_t rope_heads = 0;  // as checkpoint::open_gguf puts Llama's q and k rows back
      if (name->ends_with("q_proj.weight")) rope_heads = config.num_attention_heads;
      if (name->ends_with("k_proj.weight")) rope_heads = config.num_key_value_heads;
      testing::expect_decoded_like_the_expansion(*loaded->stored_codes, tensor, rope_heads);
      ++q3_k;
    }
    EXPECT_EQ(q3_k, expected) << file;
  }
}

// Kept Q3_K matrices count as the backend holds them: 4 bits and a byte a
// group of 16 under an f16 per 256 (4.5625 bits a weight). The Q2_K
// file's Q2_K matrices are expanded whichever way it is opened.
TEST(Q3_KSource, CheckpointWeightBytesCountQ3_KAsInt4_g16) {
  const checkpoint kept = checkpoint::open(q2_k, {.show_progress = false, .keep_stored_codes = true});
  const checkpoint expanded = checkpoint::open(q2_k, {.show_progress = false});
  std::uint64_t saved = 0;
  int int4_g16 = 0;
  for (const layer_weights& layer : kept.weights().layers) {
    for (const host_tensor* t :
         {layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj, layer.gate_proj, layer.up_proj, layer.down_proj}) {
      if (t->stored_codes == nullptr) continue;
      ASSERT_EQ(t->stored_codes->format(), weight_quantization::int4_g16) << t->name;
      const auto w = static_cast<std::uint64_t>(t->numel());
      const std::uint64_t as_kept = w / 2 + w / 16 + w / 256 * 2;
      EXPECT_EQ(as_kept * 8 * 10000 / w, 45625u) << t->name;
      saved += expanded.find_tensor(t->name)->byte_size() - as_kept;
      ++int4_g16;
    }
  }
  EXPECT_EQ(int4_g16, 6);  // v, o and down of both layers
  EXPECT_EQ(expanded.weight_bytes() - kept.weight_bytes(), saved);
}

// `auto` keeps the Q3_K_M file's Q3_K q, k, gate and up as int4_g16, the
// model's format (8 of its 14 layer matrices), beside its Q4_K and Q5_K
// ones in theirs; int8 asked for streams them to be requantised instead.
TEST(Q3_KSource, AQ3_KMFileKeepsItsQ3_KMatricesAsInt4_g16) {
  const quantized_checkpoint opened = open_for_quantization(q3_k_m, "auto", true, {.show_progress = false});
  EXPECT_EQ(opened.quantization, weight_quantization::int4_g16);
  EXPECT_EQ(opened.weights.stored_quantization(), weight_quantization::int4_g16);
  for (const layer_weights& layer : opened.weights.weights().layers) {
    for (const host_tensor* t : {layer.q_proj, layer.k_proj, layer.gate_proj, layer.up_proj}) {
      ASSERT_NE(t->stored_codes, nullptr) << t->name;
      EXPECT_EQ(t->stored_codes->format(), weight_quantization::int4_g16) << t->name;
    }
    ASSERT_NE(layer.o_proj->stored_codes, nullptr);
    EXPECT_EQ(layer.o_proj->stored_codes->format(), weight_quantization::int4_asym);
    ASSERT_NE(layer.v_proj->stored_codes, nullptr);
    EXPECT_EQ(layer.v_proj->stored_codes->format(), weight_quantization::int5_asym);
  }

  const quantized_checkpoint int8 = open_for_quantization(q3_k_m, "int8", true, {.show_progress = false});
  EXPECT_EQ(int8.quantization, weight_quantization::int8);
  const layer_weights& streamed = int8.weights.weights().layers.at(0);
  EXPECT_EQ(streamed.q_proj->stored_codes, nullptr);
  EXPECT_NE(streamed.q_proj->rows, nullptr);
  EXPECT_EQ(streamed.q_proj->stored_bits, 8);  // on a grid of a scale per row (ggml_code_bits)
  // No quantised kernels: expanded and run as stored.
  EXPECT_EQ(open_for_quantization(q3_k_m, "auto", false, {.show_progress = false}).quantization,
            weight_quantization::none);
}

}  // namespace
}  // namespace troupe
