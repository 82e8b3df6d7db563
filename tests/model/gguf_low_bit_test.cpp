// GGUF files below 4 bits, made by llama.cpp's own quantiser from a
// hidden-256 Llama (tests/fixtures/gguf/README.md): Q2_K (Q2_K and Q3_K
// matrices) and Q3_K_M (Q3_K, Q4_K and Q5_K ones). Their 2- and 3-bit
// matrices expand as the gguf package expands them (GgufDequantize). Their
// scales per 16 weights put a group of 32 on no 4-bit grid, so under
// `auto` they run as int8 (rounding them to int4_asym put the logits 0.14-0.21
// of the largest logit off the expanded file's); the Q3_K_M file's Q4_K
// and Q5_K matrices stay as stored, the 2- to 3-bit projections run as
// int8.

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

TEST(LowBitGguf, Q2_KAndQ3_KMatricesAreStreamedToTheBackend) {
  const quantized_checkpoint opened = open_for_quantization(q2_k, "auto", true, {.show_progress = false});
  EXPECT_EQ(opened.quantization, weight_quantization::int8);
  EXPECT_EQ(matrices_of_type(opened.weights, ggml_type::q2_k), 8);  // q, k, gate, up of both layers
  EXPECT_EQ(matrices_of_type(opened.weights, ggml_type::q3_k), 6);  // v, o, down
  for (const layer_weights& layer : opened.weights.weights().layers) {
    EXPECT_EQ(layer.q_proj->stored_bits, 8);
    EXPECT_EQ(layer.v_proj->stored_bits, 8);
    EXPECT_NE(layer.q_proj->rows, nullptr) << "expanded only as the backend prepares it";
    EXPECT_EQ(layer.q_proj->data, nullptr);
  }
}

// Measured max |Δlogit| / max |logit| against the file expanded to bf16
// (int8 activations and LM head on the quantised side), on this random
// model: Q2_K 0.0277.
TEST(LowBitGguf, AQ2_KFileRunsAsInt8LikeTheExpandedFile) {
  EXPECT_LE(testing::error_against_expanded(q2_k, weight_quantization::int8), 0.05);
}

// Q3_K_M: Q3_K q, k, gate, up; Q4_K o and down (kept as stored, the
// model's int4_asym); Q5_K v (kept too, as int5_asym). Measured as above:
// 0.0279 (0.0281 with v expanded to int8; 0.0286 with that and the Q4_K
// products rounded to f16).
TEST(LowBitGguf, AQ3_KMFileKeepsItsQ4_KAndQ5_KMatricesAndRunsTheRestAsInt8) {
  EXPECT_LE(testing::error_against_expanded(q3_k_m, weight_quantization::int4_asym), 0.05);
  const quantized_checkpoint opened = open_for_quantization(q3_k_m, "auto", true, {.show_progress = false});
  const layer_weights& layer = opened.weights.weights().layers[0];
  EXPECT_NE(layer.o_proj->stored_codes, nullptr) << "Q4_K kept";
  ASSERT_NE(layer.v_proj->stored_codes, nullptr) << "Q5_K kept";
  EXPECT_EQ(layer.v_proj->stored_codes->format(), weight_quantization::int5_asym);
  EXPECT_EQ(layer.q_proj->stored_bits, 8);
  backend_options options;
  options.threads = 2;
  const auto device = make_backend("cpu", options);
  const llama_model model(opened.weights.config(), opened.weights.weights(), *device, opened.quantization);
  // q, k, gate and up (Q3_K) int8, v (Q5_K) int5_asym, o and down (Q4_K) int4_asym.
  EXPECT_EQ(describe_linear_formats(model, opened.quantization),
            "int4_asym (8 of 14 projections int8) (2 of 14 projections int5_asym)");
}

}  // namespace
}  // namespace troupe
