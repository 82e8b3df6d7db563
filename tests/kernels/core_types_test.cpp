// Scalar conversions, the Philox generator, rotary frequencies and step
// validation: the small shared pieces every backend relies on.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/dtype.hpp"
#include "kernels/philox.hpp"
#include "kernels/rope_spec.hpp"
#include "kernels/step_batch.hpp"

namespace troupe {
namespace {

TEST(Dtype, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies exactly halfway between two bf16 values: ties to even (down).
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3 * 2^-8 is halfway too, rounds up to the even mantissa.
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_FLOAT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Dtype, F16RoundTripsRepresentableValues) {
  for (float v : {0.0f, 1.0f, -1.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f}) {
    EXPECT_EQ(f16_to_float(float_to_f16(v)), v) << v;
  }
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);            // rounds past the largest half: inf
  EXPECT_EQ(float_to_f16(1.0f + 1.0f / 2048), 0x3c00);  // halfway, ties to even
  EXPECT_EQ(float_to_f16(1.0f + 3.0f / 2048), 0x3c02);
}

TEST(Dtype, ConvertElementsBetweenTypes) {
  const float src[3] = {1.0f, -0.5f, 3.0f};
  std::uint16_t half[3];
  float back[3];
  convert_elements(src, dtype::f32, half, dtype::bf16, 3);
  convert_elements(half, dtype::bf16, back, dtype::f32, 3);
  EXPECT_EQ(back[1], -0.5f);
  EXPECT_EQ(parse_dtype("bfloat16"), dtype::bf16);
  EXPECT_FALSE(parse_dtype("int8").has_value());
}

// Known-answer vectors of Random123's philox4x32_10.
TEST(Philox, MatchesRandom123KnownAnswers) {
  auto zero = philox4x32_raw({{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  auto ones = philox4x32_raw({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
  auto pi = philox4x32_raw({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi.v[0], 0xd16cfe09u);
  EXPECT_EQ(pi.v[1], 0x94fdccebu);
  EXPECT_EQ(pi.v[2], 0x5001e420u);
  EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

TEST(Philox, UniformIsInUnitIntervalAndKeyedBySeedAndIndex) {
  double sum = 0;
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const float u = philox_uniform(42, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  EXPECT_EQ(philox_uniform(7, 3), philox_uniform(7, 3));
  EXPECT_NE(philox_uniform(7, 3), philox_uniform(8, 3));
  EXPECT_NE(philox_uniform(7, 3), philox_uniform(7, 4));
}

TEST(Rope, DefaultFrequenciesFollowTheta) {
  rope_spec spec;
  spec.head_dim = 8;
  spec.theta = 10000.0;
  auto f = rope_inverse_frequencies(spec, 10);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_NEAR(f[1], 1.0 / std::pow(10000.0, 2.0 / 8), 1e-7);
  EXPECT_NEAR(f[3], 1.0 / std::pow(10000.0, 6.0 / 8), 1e-9);
}

TEST(Rope, LinearDividesAndDynamicOnlyAppliesPastTheLimit) {
  rope_spec spec;
  spec.head_dim = 16;
  spec.scaling = rope_scaling_kind::linear;
  spec.factor = 4.0;
  auto plain = rope_inverse_frequencies(rope_spec{.head_dim = 16}, 1);
  auto linear = rope_inverse_frequencies(spec, 1);
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_FLOAT_EQ(linear[i], plain[i] / 4.0f);

  spec.scaling = rope_scaling_kind::dynamic;
  spec.factor = 2.0;
  spec.max_position_embeddings = 100;
  EXPECT_EQ(rope_inverse_frequencies(spec, 100), plain);
  auto longer = rope_inverse_frequencies(spec, 400);
  EXPECT_FLOAT_EQ(longer[0], 1.0f);
  EXPECT_LT(longer[7], plain[7]);  // a larger base lowers every non-zero frequency
}

TEST(Rope, Llama3KeepsHighFrequenciesAndScalesLowOnes) {
  rope_spec spec;
  spec.head_dim = 64;
  spec.theta = 500000.0;
  spec.scaling = rope_scaling_kind::llama3;
  spec.factor = 8.0;
  spec.low_freq_factor = 1.0;
  spec.high_freq_factor = 4.0;
  spec.original_max_position = 8192;
  auto plain = rope_inverse_frequencies(rope_spec{.head_dim = 64, .theta = 500000.0}, 1);
  auto scaled = rope_inverse_frequencies(spec, 1);
  EXPECT_FLOAT_EQ(scaled[0], plain[0]);           // wavelength 2π: high frequency, unchanged
  EXPECT_FLOAT_EQ(scaled[31], plain[31] / 8.0f);  // longest wavelength: divided by factor
}

step_batch two_sequence_batch() {
  step_batch b;
  b.token_ids = {5, 6, 7};
  b.positions = {0, 1, 4};
  b.query_start = {0, 2, 3};
  b.seq_lens = {2, 5};
  b.kv_indptr = {0, 1, 3};
  b.kv_indices = {3, 0, 2};
  b.kv_last_page_len = {2, 1};
  b.slot_mapping = {12, 13, 8};
  b.logits_indices = {1, 2};
  return b;
}

TEST(StepBatch, ValidBatchPasses) {
  kv_cache_spec spec{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .block_size = 4, .num_blocks = 4};
  EXPECT_EQ(validate_step_batch(two_sequence_batch(), spec), "");
}

TEST(StepBatch, RejectsInconsistentBatches) {
  kv_cache_spec spec{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .block_size = 4, .num_blocks = 4};
  auto b = two_sequence_batch();
  b.kv_indices[0] = 9;
  EXPECT_EQ(validate_step_batch(b, spec), "kv_indices holds a block outside the pool");
  b = two_sequence_batch();
  b.seq_lens[1] = 6;
  EXPECT_EQ(validate_step_batch(b, spec), "seq_lens disagrees with the page table");
  b = two_sequence_batch();
  b.positions[2] = 5;
  EXPECT_EQ(validate_step_batch(b, spec), "a position is not below its sequence length");
  b = two_sequence_batch();
  b.slot_mapping[0] = 16;
  EXPECT_EQ(validate_step_batch(b, spec), "slot_mapping holds a slot outside the pool");
  b = two_sequence_batch();
  b.query_start = {0, 3, 2};
  EXPECT_EQ(validate_step_batch(b, spec), "query_start is not monotone");
}

}  // namespace
}  // namespace troupe
