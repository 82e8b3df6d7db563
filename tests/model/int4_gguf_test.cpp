// GGUF Q4_0 / Q4_1 matrices loaded natively as troupe int4 / int4_asym,
// Q5_0 / Q5_1 ones as int5_asym and IQ4_NL ones as int4_nl (kernels/stored_code_source.hpp): the packed weights equal,
// bit for bit (up to the sign of zero), what the block dequantiser expands the file to; nothing is expanded at load;
// the model runs on them; and the knob `quantization` picks the path.

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <tuple>

#include "kernels/backend.hpp"
#include "kernels/stored_code_source.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf_dequantize.hpp"
#include "model/gguf_model.hpp"
#include "model/llama_model.hpp"
#include "tests/model/model_test_util.hpp"
#include "tests/model/stored_weights_util.hpp"

namespace troupe {
namespace {

const std::filesystem::path fixtures = std::filesystem::path(TROUPE_FIXTURES_DIR) / "gguf";

// Every layer matrix of `file` kept as int4 and packed equals the f32 the
// existing dequantiser expands its file rows to (RoPE rows permuted alike).
void expect_bit_identical(const std::filesystem::path& file, weight_quantization format) {
  const checkpoint kept = checkpoint::open(file, {.show_progress = false, .keep_stored_codes = true});
  ASSERT_EQ(kept.stored_quantization(), format);
  const model_config& config = kept.config();
  int matrices = 0;
  for (const gguf_tensor& tensor : kept.gguf()->tensors()) {
    const auto name = gguf_hf_tensor_name(tensor.name);
    if (!name || !name->ends_with("_proj.weight")) continue;
    const host_tensor* loaded = kept.find_tensor(*name);
    ASSERT_NE(loaded->stored_codes, nullptr) << *name;
    EXPECT_EQ(loaded->data, nullptr) << *name << ": nothing is expanded at load";
    EXPECT_EQ(loaded->stored_codes->format(), format);
    std::int64_t rope_heads = 0;
    if (name->ends_with("q_proj.weight")) rope_heads = config.num_attention_heads;
    if (name->ends_with("k_proj.weight")) rope_heads = config.num_key_value_heads;
    const gguf_rows rows(tensor, rope_heads);
    const testing::packed_weights packed(*loaded);
    std::vector<float> expected(rows.row_length);
    for (std::uint64_t n = 0; n < rows.count; ++n) {
      gguf_dequantize(tensor.type, rows.row(n), expected.data(), rows.row_length);
      for (std::uint64_t k = 0; k < rows.row_length; ++k) {
        // Equal as floats: the same bits, except that a code of 8 under a
        // negative scale is +0 here (d·8 − 8d) and −0 there (d·0).
        const float got = packed.at(static_cast<std::int64_t>(n), static_cast<std::int64_t>(k));
        ASSERT_EQ(got, expected[k]) << *name << " [" << n << ", " << k << "]";
        if (got != 0.0f) {
          std::uint32_t a, b;
          std::memcpy(&a, &got, 4);
          std::memcpy(&b, &expected[k], 4);
          ASSERT_EQ(a, b) << *name << " [" << n << ", " << k << "]";
        }
      }
    }
    ++matrices;
  }
  EXPECT_EQ(matrices, 7 * config.num_hidden_layers);
}

TEST(Int4Gguf, Q4_0MatricesPackExactlyAsTheDequantiserExpandsThem) {
  expect_bit_identical(fixtures / "llama_tiny_q4_0.gguf", weight_quantization::int4);
}

TEST(Int4Gguf, Q4_1MatricesPackExactlyAsInt4Asym) {
  expect_bit_identical(fixtures / "llama_tiny_q4_1.gguf", weight_quantization::int4_asym);
}

// Q5_0 (x = d · (q − 16)) and Q5_1 (x = d · q + m): their 5-bit codes kept
// as int5_asym, Q5_0's offset −16 d exact, so every weight is the file's.
TEST(Int4Gguf, Q5_0AndQ5_1MatricesPackExactlyAsInt5Asym) {
  expect_bit_identical(fixtures / "llama_tiny_q5_0.gguf", weight_quantization::int5_asym);
  expect_bit_identical(fixtures / "llama_tiny_q5_1.gguf", weight_quantization::int5_asym);
}

// IQ4_NL (x = d · level[q], 16 int8 levels): its codes and scales kept as
// int4_nl, so every weight is the file's.
TEST(Int4Gguf, IQ4_NLMatricesPackExactlyAsInt4Nl) {
  expect_bit_identical(fixtures / "llama_tiny_iq4_nl.gguf", weight_quantization::int4_nl);
}

// Native int4 against the file expanded to bf16 (the path every other
// type takes): the same weights up to bf16 rounding, int8 activations on
// the int4 side. Measured on this fixture (max |Δlogit| / max |logit|):
// Q4_0 0.0125, Q4_1 0.0140 with the int8 LM head (the bound leaves 1.8x
// room); the greedy continuations are identical, also with the default
// head of a tied 4-bit model (int4, its best logits rescored exactly).
TEST(Int4Gguf, NativeInt4RunsLikeTheExpandedFile) {
  for (const char* file : {"llama_tiny_q4_0.gguf", "llama_tiny_q4_1.gguf", "llama_tiny_q5_0.gguf",
                           "llama_tiny_q5_1.gguf", "llama_tiny_iq4_nl.gguf"}) {
    const quantized_checkpoint native = open_for_quantization(fixtures / file, "auto", true, {.show_progress = false});
    const quantized_checkpoint expanded =
        open_for_quantization(fixtures / file, "none", true, {.show_progress = false});
    EXPECT_NE(native.quantization, weight_quantization::none) << file;
    EXPECT_EQ(expanded.quantization, weight_quantization::none) << file;
    EXPECT_NE(expanded.weights.weights().layers[0].q_proj->data, nullptr) << file;
    const testing::prompt_run a =
        testing::run_fixed_prompt(native.weights, native.quantization, weight_quantization::int8);
    const testing::prompt_run b = testing::run_fixed_prompt(expanded.weights, expanded.quantization);
    EXPECT_EQ(testing::run_fixed_prompt(native.weights, native.quantization).greedy, b.greedy)
        << file << ", default LM head";
    const double error = testing::relative_max_error(a.logits, b.logits);
    RecordProperty(std::string(file) + "_relative_error", std::to_string(error));
    EXPECT_LE(error, 0.025) << file;
    EXPECT_EQ(a.greedy, b.greedy) << file;
  }
}

// Qwen2 (q/k/v biases) in Q4_0 with a Q8_0 v in every layer: v runs as int8
// and q, k beside it as their int4 codes, the q/k/v stack split in two
// linears that each add their own parts' biases (the fixture's biases
// scaled up 20×). Measured max |Δlogit| / max |logit| against the file
// expanded to bf16: 0.0119; with the split pieces given no biases (a local
// edit): 1.84.
TEST(Int4Gguf, ABiasedStackSplitsByFormatLikeTheExpandedFile) {
  const auto file = fixtures / "qwen2_tiny_q4_0_q8_0_v.gguf";
  EXPECT_LE(testing::error_against_expanded(file, weight_quantization::int4), 0.025);
  const quantized_checkpoint opened = open_for_quantization(file, "auto", true, {.show_progress = false});
  ASSERT_TRUE(opened.weights.config().qkv_bias);
  const auto device = make_backend("cpu", backend_options{});
  const llama_model model(opened.weights.config(), opened.weights.weights(), *device, opened.quantization);
  using enum weight_quantization;
  for (int i = 0; i < static_cast<int>(opened.weights.config().num_hidden_layers); ++i)
    EXPECT_EQ(model.projection_formats(i), (std::array{int4, int4, int8, int4, int4, int4, int4})) << i;
}

TEST(Int4Gguf, TheKnobChoosesNativeExpandedOrRequantised) {
  const auto q4_0 = fixtures / "llama_tiny_q4_0.gguf";
  const checkpoint_options quiet{.show_progress = false};
  EXPECT_EQ(open_for_quantization(q4_0, "auto", true, quiet).quantization, weight_quantization::int4);
  EXPECT_EQ(open_for_quantization(q4_0, "int4", true, quiet).weights.stored_quantization(), weight_quantization::int4);
  // No int4 kernels (cuda): expanded, run as stored.
  const quantized_checkpoint gpu = open_for_quantization(q4_0, "auto", false, quiet);
  EXPECT_EQ(gpu.quantization, weight_quantization::none);
  EXPECT_EQ(gpu.weights.stored_quantization(), weight_quantization::none);
  // Asked for the other int4 format: expanded, then quantised to it by the backend.
  const quantized_checkpoint asym = open_for_quantization(q4_0, "int4_asym", true, quiet);
  EXPECT_EQ(asym.quantization, weight_quantization::int4_asym);
  EXPECT_EQ(asym.weights.stored_quantization(), weight_quantization::none);
  EXPECT_EQ(open_for_quantization(q4_0, "int8", true, quiet).weights.stored_quantization(), weight_quantization::none);
  // Q8_0 has no exact int4/int8 home: expanded, then int8 per row on the cpu; bf16 files run as stored.
  const quantized_checkpoint q8 = open_for_quantization(fixtures / "llama_tiny_q8_0.gguf", "auto", true, quiet);
  EXPECT_EQ(q8.quantization, weight_quantization::int8);
  EXPECT_EQ(q8.weights.stored_quantization(), weight_quantization::none);
  EXPECT_EQ(open_for_quantization(fixtures / "llama_tiny_q8_0.gguf", "auto", false, quiet).quantization,
            weight_quantization::none);
  EXPECT_EQ(open_for_quantization(fixtures / "llama_tiny_bf16.gguf", "auto", true, quiet).quantization,
            weight_quantization::none);
  EXPECT_THAT(
      testing::error_of([&] { open_for_quantization(q4_0, "int3", true, quiet); }),
      ::testing::HasSubstr("quantization 'int3' is not one of auto, none, int8, int4, int4_asym, int5_asym, int4_nl"));
  // A Q5_0 file as stored on the cpu; asked for int4, expanded and requantised.
  const auto q5_0 = fixtures / "llama_tiny_q5_0.gguf";
  EXPECT_EQ(open_for_quantization(q5_0, "auto", true, quiet).quantization, weight_quantization::int5_asym);
  EXPECT_EQ(open_for_quantization(q5_0, "int4", true, quiet).weights.stored_quantization(), weight_quantization::none);
  EXPECT_EQ(open_for_quantization(q5_0, "auto", false, quiet).quantization, weight_quantization::none);
}

// weight_bytes counts a kept matrix at its codes plus an f16 scale per 32
// weights, and an f16 offset per 32 for int4_asym / int5_asym only (int4
// and int4_nl have none), or with block factors (IQ4_XS) a byte per 32 and
// an f16 per 256 for each: against the same file expanded, the difference
// is exactly that, matrix by matrix.
TEST(Int4Gguf, KeptMatricesCountTheirCodesScalesAndOnlyTheirOwnOffsets) {
  for (const auto& [file, bits, offsets, factored] :
       {std::tuple{"llama_tiny_q4_0.gguf", 4, false, false}, std::tuple{"llama_tiny_q4_1.gguf", 4, true, false},
        std::tuple{"llama_tiny_q5_0.gguf", 5, true, false}, std::tuple{"llama_tiny_iq4_nl.gguf", 4, false, false},
        std::tuple{"llama_k256_iq4_xs.gguf", 4, false, true}}) {
    const checkpoint kept = checkpoint::open(fixtures / file, {.show_progress = false, .keep_stored_codes = true});
    const checkpoint expanded = checkpoint::open(fixtures / file, {.show_progress = false});
    std::uint64_t saved = 0;
    int matrices = 0;
    for (const layer_weights& layer : kept.weights().layers) {
      for (const host_tensor* t :
           {layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj, layer.gate_proj, layer.up_proj, layer.down_proj}) {
        ASSERT_NE(t->stored_codes, nullptr) << file << " " << t->name;
        const auto weights = static_cast<std::uint64_t>(t->numel());
        const std::uint64_t kinds = offsets ? 2 : 1;
        // Block factors: a byte a group of 32 and an f16 per 256 weights, for each kind.
        const std::uint64_t as_kept =
            weights * bits / 8 + (factored ? kinds * (weights / 32 + weights / 256 * 2) : kinds * weights / 32 * 2);
        saved += expanded.find_tensor(t->name)->byte_size() - as_kept;
        ++matrices;
      }
    }
    EXPECT_EQ(matrices, 7 * kept.config().num_hidden_layers) << file;
    EXPECT_EQ(expanded.weight_bytes() - kept.weight_bytes(), saved) << file;
  }
}

TEST(Int4Gguf, KeptMatricesCountHalfAByteAWeightAndRefuseAFloatPreparation) {
  const checkpoint kept =
      checkpoint::open(fixtures / "llama_tiny_q4_0.gguf", {.show_progress = false, .keep_stored_codes = true});
  const checkpoint expanded = checkpoint::open(fixtures / "llama_tiny_q4_0.gguf", {.show_progress = false});
  EXPECT_LT(kept.weight_bytes(), expanded.weight_bytes());
  const auto device = make_backend("cpu", backend_options{});
  const host_tensor& q = *kept.weights().layers[0].q_proj;
  EXPECT_THAT(testing::error_of([&] {
                device->prepare_linear({&q, 1}, {});
              }),
              ::testing::HasSubstr("is stored as 4-bit codes; prepare it as int4"));
  EXPECT_THAT(testing::error_of([&] {
                device->prepare_quantized_linear({&q, 1}, {}, weight_quantization::int4_asym);
              }),
              ::testing::HasSubstr("is stored as int4, not int4_asym"));
  // A model asked to run them unquantised is refused the same way (open_for_quantization never asks).
  EXPECT_THAT(
      testing::error_of([&] { llama_model(kept.config(), kept.weights(), *device, weight_quantization::none); }),
      ::testing::HasSubstr("is stored as 4-bit codes; prepare it as int4"));
}

}  // namespace
}  // namespace troupe
