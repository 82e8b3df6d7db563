// GGUF files in llama.cpp's Q4_K_M and Q5_K_M mixes (tests/fixtures/gguf/
// README.md). Q4_K_M: its Q4_K matrices load as int4_asym groups without
// expanding (codes and block factors as stored; read_rows' f16 products
// refuse a block beyond f16's range, by name), its Q6_K matrices as int6
// (codes and factors as stored too), and the model runs like the whole
// file expanded. Q5_K_M: its Q5_K matrices as int5_asym beside int6 ones,
// run like the file expanded to bf16. IQ4_XS and IQ4_NL (llama-quantize's):
// kept as int4_nl, run like the file expanded. (The Q6_K source itself:
// gguf_q6_k_test.cpp.) Opened for a quantised model (open_for_quantization
// on the cpu), layer matrices in the other block formats are expanded only
// as the backend prepares them (host_tensor::rows).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/backend.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf_dequantize.hpp"
#include "model/gguf_model.hpp"
#include "model/llama_model.hpp"
#include "tests/model/model_test_util.hpp"
#include "tests/model/stored_weights_util.hpp"

namespace troupe {
namespace {

const std::filesystem::path fixtures = std::filesystem::path(TROUPE_FIXTURES_DIR) / "gguf";
const std::filesystem::path q4_k_m = fixtures / "llama_k256_q4_k_m.gguf";
const std::filesystem::path q5_k_m = fixtures / "llama_k256_q5_k_m.gguf";
const std::filesystem::path iq4_xs = fixtures / "llama_k256_iq4_xs.gguf";

std::int64_t rope_heads_of(const model_config& config, const std::string& name) {
  if (name.ends_with("q_proj.weight")) return config.num_attention_heads;
  if (name.ends_with("k_proj.weight")) return config.num_key_value_heads;
  return 0;
}

// Each kept Q4_K / Q5_K / IQ4_XS / Q6_K weight is the file's exactly: its
// block factors (d, −dmin and the 6-bit scales and mins; IQ4_XS's d and
// signed s − 32; Q6_K's d and int8 scales per 16) kept as they are, as the
// CPU backend packs them. A code, fifth bit or scale read from the wrong
// place is off by a whole step. The file's Q6_K matrices are kept as int6.
void expect_k_codes_kept(const std::filesystem::path& file, ggml_type kept_type, weight_quantization format,
                         int kept_per_layer, int q6_k_matrices) {
  const checkpoint kept = checkpoint::open(file, {.show_progress = false, .keep_stored_codes = true});
  ASSERT_EQ(kept.stored_quantization(), format);
  int kept_count = 0, q6_k = 0;
  for (const gguf_tensor& tensor : kept.gguf()->tensors()) {
    const auto name = gguf_hf_tensor_name(tensor.name);
    if (!name || !name->ends_with("_proj.weight")) continue;
    const host_tensor* loaded = kept.find_tensor(*name);
    const bool six_bits = tensor.type == ggml_type::q6_k;
    ASSERT_EQ(tensor.type, six_bits ? ggml_type::q6_k : kept_type) << *name;
    ASSERT_NE(loaded->stored_codes, nullptr) << *name;
    EXPECT_EQ(loaded->data, nullptr) << *name << ": nothing is expanded at load";
    EXPECT_EQ(loaded->stored_codes->format(), six_bits ? weight_quantization::int6 : format) << *name;
    const gguf_rows rows(tensor, rope_heads_of(kept.config(), *name));
    const testing::packed_weights packed(*loaded);
    ASSERT_TRUE(packed.block_factored()) << *name;
    std::vector<float> expected(rows.row_length);
    for (std::uint64_t n = 0; n < rows.count; ++n) {
      gguf_dequantize(tensor.type, rows.row(n), expected.data(), rows.row_length);
      for (std::uint64_t k = 0; k < rows.row_length; ++k) {
        ASSERT_EQ(packed.at(static_cast<std::int64_t>(n), static_cast<std::int64_t>(k)), expected[k])
            << *name << " [" << n << ", " << k << "]";
      }
    }
    if (six_bits) {  // int6 has no read_rows (scales per 16)
      ++q6_k;
      continue;
    }
    // read_rows (f16 group scales, CUDA's layout): the same codes as
    // read_codes, and each weight within the f16 rounding of its group's
    // products (2^-11 of each, < 2^-9 of its 256-block's largest weight).
    const std::uint64_t last = rows.count - 1, length = rows.row_length;
    std::vector<std::uint8_t> codes(length), kept_codes(length);
    std::vector<std::uint16_t> scales(length / 32), offsets(length / 32);
    loaded->stored_codes->read_rows(static_cast<std::int64_t>(last), 1, codes.data(), scales.data(), offsets.data());
    loaded->stored_codes->read_codes(static_cast<std::int64_t>(last), 1, kept_codes.data());
    ASSERT_EQ(codes, kept_codes) << *name;
    gguf_dequantize(tensor.type, rows.row(last), expected.data(), length);
    for (std::uint64_t k = 0; k < length; ++k) {
      const float offset = quantization_group_offsets(format) ? f16_to_float(offsets[k / 32]) : 0.0f;
      const float largest = *std::max_element(expected.begin() + static_cast<std::ptrdiff_t>(k / 256 * 256),
                                              expected.begin() + static_cast<std::ptrdiff_t>(k / 256 * 256 + 256),
                                              [](float a, float b) { return std::fabs(a) < std::fabs(b); });
      ASSERT_NEAR(stored_code_value(format, codes[k], f16_to_float(scales[k / 32]), offset), expected[k],
                  std::fabs(largest) / 512.0f)
          << *name << " read_rows [" << last << ", " << k << "]";
    }
    ++kept_count;
  }
  EXPECT_EQ(kept_count, kept_per_layer * static_cast<int>(kept.config().num_hidden_layers));
  EXPECT_EQ(q6_k, q6_k_matrices);
}

TEST(KQuantGguf, Q4_KAndQ6_KMatricesKeepTheirCodes) {
  expect_k_codes_kept(q4_k_m, ggml_type::q4_k, weight_quantization::int4_asym, 5, 4);  // Q6_K v, down of both layers
}

// llama-quantize's IQ4_XS: every layer matrix IQ4_XS (the embeddings Q6_K).
TEST(KQuantGguf, IQ4_XSMatricesKeepTheirCodesAsInt4Nl) {
  expect_k_codes_kept(iq4_xs, ggml_type::iq4_xs, weight_quantization::int4_nl, 7, 0);
}

// Q5_K_M: Q6_K attn_v and ffn_down of layer 0 only.
TEST(KQuantGguf, Q5_KAndQ6_KMatricesKeepTheirCodes) {
  const checkpoint kept = checkpoint::open(q5_k_m, {.show_progress = false, .keep_stored_codes = true});
  ASSERT_EQ(kept.config().num_hidden_layers, 2);
  expect_k_codes_kept(q5_k_m, ggml_type::q5_k, weight_quantization::int5_asym, 6, 2);
}

// `auto` keeps the Q4_K matrices as int4_asym and the Q6_K ones (v, down)
// as int6, q and k beside v staying int4_asym (llama_model's
// projection_format; q/k/v split in two linears); `none` runs the whole file
// expanded to bf16. Measured max |Δlogit| / max |logit| on this random model
// (int8 activations and LM head on the quantised side; the reference is
// itself the file rounded to bf16): 0.0228 with the Q4_K block factors and
// the Q6_K codes and factors kept exactly, the CPU's layouts. Before int6,
// with v and down expanded and run as int8: 0.0269 (0.0261 with the Q4_K
// products rounded to f16, 0.0254 with the whole q/k/v as int8); rounding
// the Q6_K matrices to int4_asym instead gave 0.20, and the whole file
// requantised to int8 0.039.
TEST(KQuantGguf, NativeQ4_KRunsLikeTheExpandedFile) {
  EXPECT_LE(testing::error_against_expanded(q4_k_m, weight_quantization::int4_asym), 0.04);
  const quantized_checkpoint opened = open_for_quantization(q4_k_m, "auto", true, {.show_progress = false});
  backend_options options;
  options.threads = 2;
  const auto device = make_backend("cpu", options);
  const llama_model model(opened.weights.config(), opened.weights.weights(), *device, opened.quantization);
  using enum weight_quantization;
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(model.projection_formats(i),
              (std::array{int4_asym, int4_asym, int6, int4_asym, int4_asym, int4_asym, int6}))
        << i;
  EXPECT_EQ(describe_linear_formats(model, opened.quantization), "int4_asym (4 of 14 projections int6)");
  // No int4 kernels (cuda): expanded, run as stored.
  EXPECT_EQ(open_for_quantization(q4_k_m, "auto", false, {.show_progress = false}).quantization,
            weight_quantization::none);
}

// The bytes a step reads are the backend's own weights: the Q4_K_M file's
// kept matrices at 4.625 bits a weight (block factors), its Q6_K ones as
// int6, and a layer-skipping drafter over the same weights counts only its
// layers.
TEST(KQuantGguf, StreamedWeightBytesCountTheLayersAModelRuns) {
  const quantized_checkpoint opened = open_for_quantization(q4_k_m, "auto", true, {.show_progress = false});
  const auto device = make_backend("cpu", backend_options{});
  const llama_model model(opened.weights.config(), opened.weights.weights(), *device, opened.quantization);
  ASSERT_EQ(model.config().num_hidden_layers, 2);
  const llama_model first(model, *device, {0}), second(model, *device, {1});
  // Each drafter counts the head and its one layer; together they count the head twice.
  const std::size_t head = first.linear_weight_bytes() + second.linear_weight_bytes() - model.linear_weight_bytes();
  const model_config& c = model.config();
  const weight_quantization head_format =
      lm_head_quantization(opened.quantization, "auto", lm_head_rescored_by_default(c, *device)).value();
  // An int4 head is quantised at load, to block factors.
  EXPECT_EQ(
      head,
      cpu::layout_for(head_format, c.vocab_size, c.hidden_size, head_format == weight_quantization::int4).total_bytes);
  // Layer 1 (Q4_K but for its Q6_K v and down): q/k, o and gate/up block-factored, v and down int6.
  const std::int64_t h = c.hidden_size, f = c.intermediate_size, q = c.num_attention_heads * c.head_dim,
                     kv = c.num_key_value_heads * c.head_dim;
  using enum weight_quantization;
  const std::size_t layer =
      cpu::layout_for(int4_asym, q + kv, h, true).total_bytes + cpu::layout_for(int6, kv, h, true).total_bytes +
      cpu::layout_for(int4_asym, h, q, true).total_bytes + cpu::layout_for(int4_asym, 2 * f, h, true).total_bytes +
      cpu::layout_for(int6, h, f, true).total_bytes;
  EXPECT_EQ(second.linear_weight_bytes() - head, layer);
}

// `auto` keeps the Q5_K matrices as int5_asym and the Q6_K ones (layer 0's
// v and down) as int6. Measured max |Δlogit| / max |logit| against the
// file expanded to bf16: 0.0231 with the block factors kept exactly. Before
// int6, with v and down expanded and run as int8: 0.0250 (0.0290 with the
// products rounded to f16; 0.0251 with layer 0's whole q/k/v as int8; the
// whole file as int8, before int5_asym existed: 0.0304). No int5 kernels
// (cuda): expanded.
TEST(KQuantGguf, NativeQ5_KRunsLikeTheExpandedFile) {
  EXPECT_LE(testing::error_against_expanded(q5_k_m, weight_quantization::int5_asym), 0.04);
  const quantized_checkpoint opened = open_for_quantization(q5_k_m, "auto", true, {.show_progress = false});
  backend_options options;
  options.threads = 2;
  const auto device = make_backend("cpu", options);
  const llama_model model(opened.weights.config(), opened.weights.weights(), *device, opened.quantization);
  const std::array<weight_quantization, 7> first = model.projection_formats(0), second = model.projection_formats(1);
  using enum weight_quantization;
  // Layer 0's v and down are Q6_K; its q and k stay int5_asym beside v (q/k/v split in two linears).
  EXPECT_EQ(first, (std::array{int5_asym, int5_asym, int6, int5_asym, int5_asym, int5_asym, int6}));
  EXPECT_EQ(second, (std::array{int5_asym, int5_asym, int5_asym, int5_asym, int5_asym, int5_asym, int5_asym}));
  EXPECT_EQ(describe_linear_formats(model, opened.quantization), "int5_asym (2 of 14 projections int6)");
  EXPECT_EQ(open_for_quantization(q5_k_m, "auto", false, {.show_progress = false}).quantization,
            weight_quantization::none);
}

// Q8_0 layers streamed to the backend row block by row block (quantised to
// int8 from their exact values) against the file expanded at open (to bf16,
// then int8): measured max |Δlogit| / max |logit| 0.0148 (codes that the
// bf16 rounding moved across an int8 step), the same greedy
// continuation. (The Q4_K_M file's Q6_K matrices are kept beside its Q4_K
// ones, as int6, not streamed.)
TEST(KQuantGguf, BlockFormatsNotKeptAreExpandedOnlyAsTheBackendPreparesThem) {
  const auto q8_0 = fixtures / "llama_tiny_q8_0.gguf";
  const quantized_checkpoint streamed = open_for_quantization(q8_0, "auto", true, {.show_progress = false});
  ASSERT_EQ(streamed.quantization, weight_quantization::int8);
  for (const layer_weights& layer : streamed.weights.weights().layers) {
    for (const host_tensor* t : {layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj, layer.down_proj}) {
      EXPECT_NE(t->rows, nullptr) << t->name;
      EXPECT_EQ(t->data, nullptr) << t->name;
      EXPECT_EQ(t->stored_bits, 8) << t->name;
    }
  }
  EXPECT_NE(streamed.weights.weights().embed_tokens->data, nullptr);  // the gather reads the table
  const checkpoint eager = checkpoint::open(q8_0, {.show_progress = false});
  EXPECT_NE(eager.weights().layers[0].q_proj->data, nullptr);
  EXPECT_EQ(eager.weights().layers[0].q_proj->rows, nullptr);
  const testing::prompt_run a = testing::run_fixed_prompt(streamed.weights, weight_quantization::int8);
  const testing::prompt_run b = testing::run_fixed_prompt(eager, weight_quantization::int8);
  const double error = testing::relative_max_error(a.logits, b.logits);
  RecordProperty("relative_error", std::to_string(error));
  EXPECT_LE(error, 0.03);
  EXPECT_EQ(a.greedy, b.greedy);
  // `none` expands at open, as before.
  EXPECT_EQ(
      open_for_quantization(q8_0, "none", true, {.show_progress = false}).weights.weights().layers[0].q_proj->rows,
      nullptr);

  const quantized_checkpoint mixed = open_for_quantization(q4_k_m, "auto", true, {.show_progress = false});
  const layer_weights& layer0 = mixed.weights.weights().layers[0];
  EXPECT_NE(layer0.q_proj->stored_codes, nullptr);
  ASSERT_NE(layer0.v_proj->stored_codes, nullptr);
  EXPECT_EQ(layer0.v_proj->stored_codes->format(), weight_quantization::int6);
  EXPECT_EQ(layer0.v_proj->rows, nullptr);
}

// IQ4's 16 levels are int8 values on a non-linear grid, int4_nl's: `auto`
// keeps the codes (nothing expanded) and runs the file as int4_nl. Measured
// max |Δlogit| / max |logit| against the file expanded to bf16 (int8
// activations and LM head on the int4_nl side): IQ4_NL 0.0118 (as int8,
// before int4_nl existed: 0.0204), IQ4_XS 0.0237 (the random 256-wide model
// of the K-quant files, whose Q4_K_M file measures 0.0254 the same way).
// No int4_nl kernels (cuda): expanded.
TEST(Iq4Gguf, Iq4FilesRunAsStoredInt4NlLikeTheExpandedFile) {
  for (const auto& [file, bound] : {std::pair{fixtures / "llama_tiny_iq4_nl.gguf", 0.025}, std::pair{iq4_xs, 0.04}}) {
    const double error = testing::error_against_expanded(file, weight_quantization::int4_nl);
    RecordProperty(file.filename().string() + "_relative_error", std::to_string(error));
    EXPECT_LE(error, bound) << file;
    const quantized_checkpoint opened = open_for_quantization(file, "auto", true, {.show_progress = false});
    EXPECT_NE(opened.weights.weights().layers[0].q_proj->stored_codes, nullptr) << file;
    EXPECT_EQ(opened.weights.weights().layers[0].q_proj->data, nullptr) << file;
    EXPECT_EQ(open_for_quantization(file, "auto", false, {.show_progress = false}).quantization,
              weight_quantization::none)
        << file;
  }
}

// IQ4_NL with a Q4_0 attn_v (llama-quantize --tensor-type attn_v=q4_0): the
// model's format is int4_nl, and v keeps its Q4_0 codes too, as int4 (q/k/v
// split in two linears), never rounded onto int4_nl's levels. Measured max
// |Δlogit| / max |logit| against the file expanded to bf16: 0.0131 (v
// expanded and run as int8, before a second kept format: 0.0129; the whole
// q/k/v as int8: 0.0116; v rounded again onto int4_nl: 0.0136).
TEST(Iq4Gguf, ASecondKeptCodeTypeRunsInItsOwnFormatBesideTheModels) {
  const auto mixed = fixtures / "llama_tiny_iq4_nl_q4_0_v.gguf";
  const double error = testing::error_against_expanded(mixed, weight_quantization::int4_nl);
  RecordProperty("mixed_relative_error", std::to_string(error));
  EXPECT_LE(error, 0.025);
  const quantized_checkpoint opened = open_for_quantization(mixed, "auto", true, {.show_progress = false});
  EXPECT_EQ(opened.weights.stored_quantization(), weight_quantization::int4_nl);
  const layer_weights& layer = opened.weights.weights().layers[0];
  EXPECT_NE(layer.q_proj->stored_codes, nullptr);
  ASSERT_NE(layer.v_proj->stored_codes, nullptr);
  EXPECT_EQ(layer.v_proj->stored_codes->format(), weight_quantization::int4);
  const auto device = make_backend("cpu", backend_options{});
  const llama_model model(opened.weights.config(), opened.weights.weights(), *device, opened.quantization);
  using enum weight_quantization;
  for (std::int64_t i = 0; i < opened.weights.config().num_hidden_layers; ++i)
    EXPECT_EQ(model.projection_formats(static_cast<int>(i)),
              (std::array{int4_nl, int4_nl, int4, int4_nl, int4_nl, int4_nl, int4_nl}))
        << i;
}

// A copy of `file`, written into `dir`, whose first block of layer 0's
// q_proj (`block_bytes` long, of `type`) has d = 65504 (f16's largest), so
// that d times a 6-bit scale would be infinite in f16.
std::filesystem::path with_largest_d(const std::filesystem::path& file, ggml_type type, std::size_t block_bytes,
                                     const std::filesystem::path& dir) {
  std::string bytes = testing::read_file(file);
  {
    const gguf_file opened(file);
    const gguf_tensor* q = opened.find_tensor("blk.0.attn_q.weight");
    EXPECT_NE(q, nullptr);
    if (q == nullptr) return {};
    EXPECT_EQ(q->type, type);
    const std::string_view first_block(reinterpret_cast<const char*>(q->data), block_bytes);
    const std::size_t at = bytes.find(first_block);
    EXPECT_NE(at, std::string::npos);
    EXPECT_EQ(bytes.find(first_block, at + 1), std::string::npos);
    if (at == std::string::npos) return {};
    const std::uint16_t largest = 0x7bff;
    std::memcpy(bytes.data() + at, &largest, 2);
  }
  testing::write_file(dir / "hostile.gguf", bytes);
  return dir / "hostile.gguf";
}

// The error loading `path` as a model on the cpu gives ("" when none).
std::string cpu_load_error(const std::filesystem::path& path) {
  const quantized_checkpoint opened = open_for_quantization(path, "auto", true, {.show_progress = false});
  const auto device = make_backend("cpu", backend_options{});
  return testing::error_of(
      [&] { llama_model model(opened.weights.config(), opened.weights.weights(), *device, opened.quantization); });
}

// Block factors hold such a block (f16 d times a byte, made in f32): the
// CPU loads it and its weights are the file's exactly, up to 65504 · 63 ·
// 15. f16 group scales (read_rows, CUDA's layout) cannot, and refuse it
// naming the tensor and block.
void expect_factors_hold_largest_d(const std::filesystem::path& file, ggml_type type, std::size_t block_bytes,
                                   const std::string& refusal) {
  const testing::temp_dir dir;
  const std::filesystem::path hostile = with_largest_d(file, type, block_bytes, dir.path());
  EXPECT_EQ(cpu_load_error(hostile), "");
  const checkpoint kept = checkpoint::open(hostile, {.show_progress = false, .keep_stored_codes = true});
  const host_tensor& q = *kept.weights().layers[0].q_proj;
  const testing::packed_weights packed(q);
  ASSERT_TRUE(packed.block_factored());
  const gguf_tensor* tensor = kept.gguf()->find_tensor("blk.0.attn_q.weight");
  const gguf_rows rows(*tensor, kept.config().num_attention_heads);
  std::vector<float> expected(rows.row_length);
  gguf_dequantize(type, rows.row(0), expected.data(), rows.row_length);
  float largest = 0.0f;
  for (std::uint64_t k = 0; k < 256; ++k) {
    ASSERT_EQ(packed.at(0, static_cast<std::int64_t>(k)), expected[k]) << k;
    largest = std::max(largest, std::fabs(expected[k]));
  }
  EXPECT_GT(largest, 65504.0f) << "the block's weights pass f16's range";
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(q.shape[1]));
  std::vector<std::uint16_t> scales(codes.size() / 32), offsets(scales.size());
  EXPECT_THAT(testing::error_of([&] { q.stored_codes->read_rows(0, 1, codes.data(), scales.data(), offsets.data()); }),
              ::testing::HasSubstr(refusal));
}

TEST(KQuantGguf, AQ4_KBlockBeyondF16LoadsExactlyAndOnlyF16ScalesRefuseIt) {
  expect_factors_hold_largest_d(q4_k_m, ggml_type::q4_k, 144,
                                "tensor 'blk.0.attn_q.weight': Q4_K block 0 of row 0 has d 65504");
}

TEST(KQuantGguf, AQ5_KBlockBeyondF16LoadsExactlyAndOnlyF16ScalesRefuseIt) {
  expect_factors_hold_largest_d(q5_k_m, ggml_type::q5_k, 176,
                                "tensor 'blk.0.attn_q.weight': Q5_K block 0 of row 0 has d 65504");
}

TEST(KQuantGguf, AnIQ4_XSBlockBeyondF16LoadsExactlyAndOnlyF16ScalesRefuseIt) {
  expect_factors_hold_largest_d(iq4_xs, ggml_type::iq4_xs, 136,
                                "tensor 'blk.0.attn_q.weight': IQ4_XS block 0 of row 0 has d 65504");
}

// Kept as int5_asym with f16 scales and offsets, a Q5_0 block's offset
// −16·d must fit f16: refused on the cpu, naming the tensor.
TEST(KQuantGguf, AQ5_0BlockBeyondF16IsRefusedNamingTheTensor) {
  const testing::temp_dir dir;
  EXPECT_THAT(cpu_load_error(with_largest_d(fixtures / "llama_tiny_q5_0.gguf", ggml_type::q5_0, 22, dir.path())),
              ::testing::HasSubstr("tensor 'blk.0.attn_q.weight': Q5_0 block 0 of row 0 has d 65504"));
}

}  // namespace
}  // namespace troupe
