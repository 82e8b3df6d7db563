// Row ops (norms, SiLU-mul, embedding and logits gathers), uploads, memory,
// block copies and step validation of the CPU backend.

#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <string_view>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/isa_kernels.hpp"
#include "tests/kernels/paged_scenario.hpp"

namespace troupe {
namespace {

using test::padded_matrix;
using test::random_source;

// HF LlamaRMSNorm in double: w * x / sqrt(mean(x²) + eps).
std::vector<double> reference_rms_norm(const std::vector<float>& x, std::int64_t rows, std::int64_t cols,
                                       const std::vector<float>& weight, double eps) {
  std::vector<double> out(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c)
      sum += static_cast<double>(x[static_cast<std::size_t>(r * cols + c)]) * x[static_cast<std::size_t>(r * cols + c)];
    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(cols) + eps);
    for (std::int64_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(r * cols + c)] =
          weight[static_cast<std::size_t>(c)] * (x[static_cast<std::size_t>(r * cols + c)] * inv);
  }
  return out;
}

device_tensor upload_vector(backend& b, const std::vector<float>& values, dtype type, test::stored_values& keep) {
  keep = test::store_as(values, type);
  return b.upload(host_tensor{"norm.weight", type, {static_cast<std::int64_t>(values.size())}, keep.bytes.data()});
}

class OpsAtLevel : public ::testing::TestWithParam<cpu::isa_level> {};

TEST_P(OpsAtLevel, RmsNormVariantsMatchReference) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(GetParam());
  for (std::int64_t cols : {1, 7, 16, 64, 100, 2048}) {
    for (std::int64_t rows : {1, 3, 70}) {
      const auto x_values = rng.floats(static_cast<std::size_t>(rows * cols), -4.0f, 4.0f);
      const auto w_values = rng.floats(static_cast<std::size_t>(cols), 0.5f, 1.5f);
      test::stored_values kept;
      const device_tensor weight = upload_vector(*b, w_values, dtype::bf16, kept);  // norm weights come as bf16 too
      padded_matrix x(*b, rows, cols), out(*b, rows, cols, 2), residual(*b, rows, cols, 4);
      x.fill(x_values);
      out.poison_view();
      b->rms_norm(x.view(), weight.view, 1e-5f, out.view());
      const auto want = reference_rms_norm(x_values, rows, cols, kept.exact, 1e-5);
      EXPECT_LE(test::max_scaled_error(out.values(), want, test::max_abs(want)), 1e-5);
      EXPECT_TRUE(out.padding_intact());

      const auto r_values = rng.floats(static_cast<std::size_t>(rows * cols), -4.0f, 4.0f);
      residual.fill(r_values);
      out.poison_view();
      b->add_rms_norm(residual.view(), x.view(), weight.view, 1e-6f, out.view());
      std::vector<float> summed(r_values.size());
      for (std::size_t i = 0; i < summed.size(); ++i) summed[i] = r_values[i] + x_values[i];
      EXPECT_EQ(residual.values(), summed);  // f32 addition is exact to reproduce
      const auto want_sum = reference_rms_norm(summed, rows, cols, kept.exact, 1e-6);
      EXPECT_LE(test::max_scaled_error(out.values(), want_sum, test::max_abs(want_sum)), 1e-5);
    }
  }
}

TEST_P(OpsAtLevel, HeadRmsNormNormalisesEveryHeadInPlace) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(GetParam());
  for (int head_dim : {8, 64, 128}) {
    const std::int64_t rows = 5, heads = 6, cols = heads * head_dim;
    const auto x_values = rng.floats(static_cast<std::size_t>(rows * cols), -2.0f, 2.0f);
    const auto w_values = rng.floats(static_cast<std::size_t>(head_dim), 0.5f, 1.5f);
    test::stored_values kept;
    const device_tensor weight = upload_vector(*b, w_values, dtype::f32, kept);
    padded_matrix x(*b, rows, cols);
    x.fill(x_values);
    b->head_rms_norm(x.view(), head_dim, weight.view, 1e-6f);
    const auto want = reference_rms_norm(x_values, rows * heads, head_dim, kept.exact, 1e-6);
    EXPECT_LE(test::max_scaled_error(x.values(), want, test::max_abs(want)), 1e-5);
  }
}

TEST_P(OpsAtLevel, SiluMulMatchesReference) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(GetParam());
  for (std::int64_t f : {1, 15, 16, 33, 8192}) {
    const std::int64_t rows = 4;
    const auto g = rng.floats(static_cast<std::size_t>(rows * 2 * f), -12.0f, 12.0f);
    padded_matrix gate_up(*b, rows, 2 * f), out(*b, rows, f);
    gate_up.fill(g);
    out.poison_view();
    b->silu_mul(gate_up.view(), out.view());
    const auto got = out.values();
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t i = 0; i < f; ++i) {
        const double gate = g[static_cast<std::size_t>(r * 2 * f + i)],
                     up = g[static_cast<std::size_t>(r * 2 * f + f + i)];
        const double want = gate / (1.0 + std::exp(-gate)) * up;
        ASSERT_NEAR(got[static_cast<std::size_t>(r * f + i)], want, 1e-5 * std::max(1.0, std::abs(want)));
      }
    }
  }
}

TEST_P(OpsAtLevel, EmbedGathersAndWidensRows) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(GetParam());
  const std::vector<test::sequence_shape> shapes = {{0, 3}, {4, 2}};
  const auto step = test::build_step(shapes, 4, {0, 1, 2});
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    const std::int64_t vocab = 11, hidden = 37;
    const auto table_values = test::store_as(rng.floats(static_cast<std::size_t>(vocab * hidden)), type);
    const device_tensor table =
        b->upload(host_tensor{"embed_tokens.weight", type, {vocab, hidden}, table_values.bytes.data()});
    ASSERT_EQ(table.view.type, type);
    kv_cache_spec spec{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .block_size = 4, .num_blocks = 3};
    auto plan = b->plan_step(step.batch, spec, {1, 1, 4, 0.5f, {.head_dim = 4}});
    padded_matrix out(*b, step.batch.num_tokens(), hidden);
    out.poison_view();
    b->embed(*plan, table.view, out.view());
    for (std::int64_t t = 0; t < step.batch.num_tokens(); ++t)
      for (std::int64_t c = 0; c < hidden; ++c)
        ASSERT_EQ(out.at(t, c),
                  table_values
                      .exact[static_cast<std::size_t>(step.batch.token_ids[static_cast<std::size_t>(t)] * hidden + c)]);

    padded_matrix logits_rows(*b, 2, hidden);
    logits_rows.poison_view();
    b->gather_logits_rows(*plan, out.view(), logits_rows.view());
    for (std::int64_t l = 0; l < 2; ++l)
      for (std::int64_t c = 0; c < hidden; ++c)
        ASSERT_EQ(logits_rows.at(l, c), out.at(step.batch.logits_indices[static_cast<std::size_t>(l)], c));
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, OpsAtLevel, ::testing::ValuesIn(test::supported_levels()),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

TEST(CpuBackend, EmbedRejectsTokenIdsOutsideTheTable) {
  auto b = test::make_backend_at(cpu::detected_isa());
  auto step = test::build_step({{0, 2}}, 4, {0});
  step.batch.token_ids[1] = 11;
  std::vector<float> table(11 * 3, 0.0f);
  const device_tensor uploaded = b->upload(host_tensor{"embed", dtype::f32, {11, 3}, table.data()});
  kv_cache_spec spec{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .block_size = 4, .num_blocks = 1};
  auto plan = b->plan_step(step.batch, spec, {1, 1, 4, 0.5f, {.head_dim = 4}});
  padded_matrix out(*b, 2, 3);
  try {
    b->embed(*plan, uploaded.view, out.view());
    FAIL() << "token 11 must be rejected";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("token id 11"), std::string::npos) << e.what();
  }
}

TEST(CpuBackend, PlanStepRejectsInvalidBatchesWithTheReason) {
  auto b = test::make_backend_at(cpu::detected_isa());
  auto step = test::build_step({{3, 2}}, 4, {0, 1});
  step.batch.slot_mapping[0] = 99;
  kv_cache_spec spec{.num_layers = 1, .num_kv_heads = 2, .head_dim = 8, .block_size = 4, .num_blocks = 2};
  const attention_geometry geo{4, 2, 8, 0.3f, {.head_dim = 8}};
  try {
    b->plan_step(step.batch, spec, geo);
    FAIL() << "a slot outside the pool must be rejected";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("slot_mapping holds a slot outside the pool"), std::string::npos) << e.what();
  }
  step = test::build_step({{3, 2}}, 4, {0, 1});
  EXPECT_THROW(b->plan_step(step.batch, spec, {3, 2, 8, 0.3f, {.head_dim = 8}}), std::invalid_argument);  // 3 % 2 != 0
  EXPECT_NO_THROW(b->plan_step(step.batch, spec, geo));
}

TEST(CpuBackend, CopyBlocksRoundTripsThroughTheHostPool) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa());
  for (dtype type : {dtype::f32, dtype::bf16}) {
    const kv_cache_spec spec{
        .num_layers = 3, .num_kv_heads = 2, .head_dim = 16, .block_size = 16, .num_blocks = 12, .type = type};
    const test::filled_cache original = test::make_filled_cache(*b, spec, rng);
    auto swap = b->create_host_pool(spec, 6);
    for (std::int32_t i = 0; i < 6; ++i) std::memset(swap->block_data(i), 0xff, spec.block_bytes());
    // Swap out blocks 3, 7, 11; copy-on-write 2 -> 5; swap the three back in at 0, 1, 4.
    const std::vector<block_copy> out_and_cow = {{block_location::device, 3, block_location::host, 0},
                                                 {block_location::device, 7, block_location::host, 1},
                                                 {block_location::device, 11, block_location::host, 5},
                                                 {block_location::device, 2, block_location::device, 5}};
    b->copy_blocks(*original.cache, swap.get(), out_and_cow);
    const std::vector<block_copy> back_in = {{block_location::host, 0, block_location::device, 0},
                                             {block_location::host, 1, block_location::device, 1},
                                             {block_location::host, 5, block_location::device, 4}};
    b->copy_blocks(*original.cache, swap.get(), back_in);
    auto readback = b->create_host_pool(spec, spec.num_blocks);
    std::vector<block_copy> all;
    for (std::int32_t i = 0; i < spec.num_blocks; ++i)
      all.push_back({block_location::device, i, block_location::host, i});
    b->copy_blocks(*original.cache, readback.get(), all);
    const std::int32_t expected_source[] = {3, 7, 2, 3, 11, 2, 6, 7, 8, 9, 10, 11};
    for (std::int32_t i = 0; i < spec.num_blocks; ++i)
      EXPECT_EQ(std::memcmp(readback->block_data(i), original.host->block_data(expected_source[i]), spec.block_bytes()),
                0)
          << "block " << i;
    EXPECT_THROW(b->copy_blocks(*original.cache, swap.get(),
                                std::vector<block_copy>{{block_location::device, 12, block_location::host, 0}}),
                 std::invalid_argument);
    EXPECT_THROW(b->copy_blocks(*original.cache, nullptr,
                                std::vector<block_copy>{{block_location::device, 1, block_location::host, 0}}),
                 std::invalid_argument);
  }
}

TEST(CpuBackend, AllocationsAreAlignedAndUploadsConvertVectors) {
  auto b = test::make_backend_at(cpu::detected_isa());
  for (std::size_t bytes : {1u, 100u, 4096u, 3u << 20}) {
    const device_buffer buffer = b->allocate(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % 64, 0u);
    std::memset(buffer.data(), 0, bytes);
  }
  const std::vector<float> values = {1.5f, -2.0f, 3.25f};
  const auto half = test::store_as(values, dtype::f16);
  const device_tensor vec = b->upload(host_tensor{"bias", dtype::f16, {3}, half.bytes.data()});
  ASSERT_EQ(vec.view.type, dtype::f32);
  ASSERT_EQ(vec.view.rows, 1);
  ASSERT_EQ(vec.view.cols, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(vec.view.as<float>()[i], values[static_cast<std::size_t>(i)]);
  EXPECT_THROW(b->upload(host_tensor{"conv", dtype::f32, {2, 2, 2}, values.data()}), std::invalid_argument);
  EXPECT_EQ(b->name(), "cpu");
  EXPECT_EQ(b->activation_type(), dtype::f32);
}

// Each dispatch level parses back from its name and runs the kernel table
// built for it (a table mixed up between levels would pass every numeric
// test on a machine that runs both); the levels nest in the order detection
// assumes: VNNI without BF16 sits between plain AVX-512 and BF16.
TEST(CpuFeatures, EveryLevelHasItsOwnTableAndName) {
  const cpu::isa_level levels[] = {cpu::isa_level::scalar, cpu::isa_level::avx2, cpu::isa_level::avx512,
                                   cpu::isa_level::avx512_vnni, cpu::isa_level::avx512_bf16};
  for (std::size_t i = 0; i < std::size(levels); ++i) {
    const std::string_view name = cpu::isa_name(levels[i]);
    EXPECT_EQ(cpu::parse_isa(name), levels[i]) << name;
    EXPECT_EQ(std::string_view(cpu::kernels_for(levels[i]).name), name);
    if (i > 0) {
      EXPECT_LT(static_cast<int>(levels[i - 1]), static_cast<int>(levels[i])) << name;
    }
  }
  EXPECT_EQ(cpu::parse_isa("avx512vnni"), std::nullopt);
  EXPECT_TRUE(cpu::kernels_for(cpu::isa_level::avx512_bf16).bf16_dot);
  EXPECT_FALSE(cpu::kernels_for(cpu::isa_level::avx512_vnni).bf16_dot);
}

TEST(CpuBackend, FactoryNamesWhatIsUnavailable) {
  EXPECT_EQ(make_backend("cpu", 1)->name(), "cpu");
  EXPECT_THROW(make_backend("tpu", 1), std::runtime_error);
  if (!cuda_available()) {
    EXPECT_THROW(make_backend("cuda", 0), std::runtime_error);
  }
}

}  // namespace
}  // namespace troupe
