// GGUF files below 4 bits, made by llama.cpp's own quantiser from a
// hidden-256 Llama (tests/fixtures/gguf/README.md): Q2_K (Q2_K and Q3_K
// matrices) and Q3_K_M (Q3_K, Q4_K and Q5_K ones). Their 2- and 3-bit
// matrices expand as the gguf package expands them (GgufDequantize). Their
// scales per 16 weights put a group of 32 on no 4-bit grid (rounding them
// to int4_asym put the logits 0.14-0.21 of the largest logit off the
// expanded file's): under `auto` the Q3_K matrices keep their codes as
// int4_g16, whose scales are per 16 inputs (gguf_q3_k_test), the Q2_K
// ones, whose minimums per 16 no kept format holds, run as int8, and the
// Q3_K_M file's Q4_K and Q5_K matrices stay as stored.

#include <gtest/gtest.h>

#include "model/checkpoint.hpp"
#include "model/gguf_model.hpp"
#include "model/llama_model.hpp"
#include "tests/model/stored_weights_util.hpp"

namespace troupe {
namespace {

const std::filesystem::path fixtures = std::filesystem::path(TROUPE_FIXTURES_DIR) / "gguf";
const std::filesystem::path q2_k = fixtures / "llama_k256_q2_k.gguf";
const std::filesystem::path q3_k_m = fixtures / "llama_k256_q3_k_m.gguf";

// How many of a checkpoint's layer matrices the file stores in `type`.
int matrices_of_type(const checkpoint& opened, ggml_type type) {
  int count = 0;
  for (const gguf_tensor& tensor : opened.gguf()->tensors()) {
    const auto name = gguf_hf_tensor_name(tensor.name);
    if (name && name->ends_with("_proj.weight") && tensor.type == type) ++count;
  }
  return count;
}

// The Q2_K file's only kept matrices, its Q3_K ones, make the model's
// format int4_g16; its Q2_K ones are streamed to the backend to run as int8.
TEST(LowBitGguf, Q2_KMatricesAreStreamedToTheBackendAndQ3_KOnesKept) {
  const quantized_checkpoint opened = open_for_quantization(q2_k, "auto", true, {.show_progress = false});
  EXPECT_EQ(opened.quantization, weight_quantization::int4_g16);
  EXPECT_EQ(matrices_of_type(opened.weights, ggml_type::q2_k), 8);  // q, k, gate, up of both layers
  EXPECT_EQ(matrices_of_type(opened.weights, ggml_type::q3_k), 6);  // v, o, down
  for (const layer_weights& layer : opened.weights.weights().layers) {
    for (const host_tensor* t : {layer.q_proj, layer.k_proj, layer.gate_proj, layer.up_proj}) {
      EXPECT_EQ(t->stored_bits, 8) << t->name;
      EXPECT_NE(t->rows, nullptr) << t->name << ": expanded only as the backend prepares it";
      EXPECT_EQ(t->data, nullptr) << t->name;
    }
    for (const host_tensor* t : {layer.v_proj, layer.o_proj, layer.down_proj}) {
      ASSERT_NE(t->stored_codes, nullptr) << t->name;
      EXPECT_EQ(t->stored_codes->format(), weight_quantization::int4_g16) << t->name;
    }
  }
}

// Measured max |Δlogit| / max |logit| against the file expanded to bf16
// (int8 activations and LM head on the quantised side), on this random
// model: Q2_K 0.0236 with its Q3_K matrices as int4_g16 (0.0277 with all
// of it as int8, before int4_g16).
TEST(LowBitGguf, AQ2_KFileRunsItsQ3_KAsInt4_g16AndItsQ2_KAsInt8LikeTheExpandedFile) {
  EXPECT_LE(testing::error_against_expanded(q2_k, weight_quantization::int4_g16), 0.05);
  const quantized_checkpoint opened = open_for_quantization(q2_k, "auto", true, {.show_progress = false});
  backend_options options;
  options.threads = 2;
  const auto device = make_backend("cpu", options);
  const llama_model model(opened.weights.config(), opened.weights.weights(), *device, opened.quantization);
  // v, o and down (Q3_K) int4_g16; q, k, gate and up (Q2_K) int8.
  EXPECT_EQ(describe_linear_formats(model, opened.quantization), "int4_g16 (8 of 14 projections int8)");
}

// Q3_K_M: Q3_K q, k, gate, up (kept as int4_g16, the model's format: 8 of
// the 14 layer matrices); Q4_K o and down (kept as stored, int4_asym); Q5_K
// v (kept too, as int5_asym). Measured as above: 0.0223 (0.0279 with q, k,
// gate and up as int8 before int4_g16). The greedy continuations part at
// the eighth token, where the expanded file's two best logits are 0.001
// apart (error_against_expanded allows a near tie within the error).
TEST(LowBitGguf, AQ3_KMFileKeepsEveryMatrixAsStored) {
  EXPECT_LE(testing::error_against_expanded(q3_k_m, weight_quantization::int4_g16), 0.05);
  const quantized_checkpoint opened = open_for_quantization(q3_k_m, "auto", true, {.show_progress = false});
  const layer_weights& layer = opened.weights.weights().layers[0];
  ASSERT_NE(layer.q_proj->stored_codes, nullptr) << "Q3_K kept";
  EXPECT_EQ(layer.q_proj->stored_codes->format(), weight_quantization::int4_g16);
  ASSERT_NE(layer.o_proj->stored_codes, nullptr) << "Q4_K kept";
  EXPECT_EQ(layer.o_proj->stored_codes->format(), weight_quantization::int4_asym);
  ASSERT_NE(layer.v_proj->stored_codes, nullptr) << "Q5_K kept";
  EXPECT_EQ(layer.v_proj->stored_codes->format(), weight_quantization::int5_asym);
  backend_options options;
  options.threads = 2;
  const auto device = make_backend("cpu", options);
  const llama_model model(opened.weights.config(), opened.weights.weights(), *device, opened.quantization);
  // q, k, gate and up (Q3_K) int4_g16, o and down (Q4_K) int4_asym, v (Q5_K) int5_asym.
  EXPECT_EQ(describe_linear_formats(model, opened.quantization),
            "int4_g16 (4 of 14 projections int4_asym) (2 of 14 projections int5_asym)");
}

}  // namespace
}  // namespace troupe
