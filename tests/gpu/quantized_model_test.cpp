// Whole forward passes with quantised linear layers (--quantization int8,
// int4, int4_asym) on the CUDA backend against the CPU backend's quantised
// path, on every fixture model. Both hold the same codes (the CUDA backend
// packs the CPU quantiser's), so what differs is the arithmetic: bf16
// activations on CUDA, f32 activations quantised to int8 per group of 32 on
// the CPU. Whole prompts take the expanded-slab path (more than 16 rows),
// chunks of 4 tokens the fused GEMV.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <iostream>

#include "kernels/cuda/cuda_backend.hpp"
#include "tests/forward/forward_fixture.hpp"

namespace troupe {
namespace {

using testing::backend_choice;
using testing::fixture_model;
using testing::relative_max_error;

struct format_bound {
  weight_quantization format;
  double f32_checkpoint;   ///< max |Δlogits| / max |logit| against the CPU, f32 fixtures
  double bf16_checkpoint;  ///< the same for the bf16 fixtures
};

// About 1.5× the largest error measured in the emulator on 2026-11-25 (the
// emulator computes what the kernels compute, in the same order per lane).
constexpr format_bound bounds[] = {
    {weight_quantization::int8, 0.1, 0.05},
    {weight_quantization::int4, 0.1, 0.05},
    {weight_quantization::int4_asym, 0.1, 0.05},
};

class CudaQuantizedModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!cuda::device_present()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaQuantizedModel, LogitsMatchTheCpuQuantizedPath) {
  for (const format_bound& bound : bounds) {
    const std::string format(quantization_name(bound.format));
    backend_choice on_cpu;
    on_cpu.quantization = bound.format;
    backend_choice on_gpu = on_cpu;
    on_gpu.device = "cuda";
    auto gpu = fixture_model::load(GetParam(), on_gpu);
    auto cpu = fixture_model::load(GetParam(), on_cpu);
    ASSERT_EQ(gpu.device->name(), "cuda");
    const double tolerance = gpu.dtype_name == "f32" ? bound.f32_checkpoint : bound.bf16_checkpoint;
    batch_runner gpu_runner(*gpu.model, runner_options{});
    batch_runner cpu_runner(*cpu.model, runner_options{});
    const auto cpu_logits = cpu_runner.prompt_logits(cpu.prompts, 64);
    const auto whole = gpu_runner.prompt_logits(gpu.prompts, 64);
    double worst = 0, unquantized = 0;
    for (std::size_t i = 0; i < gpu.prompts.size(); ++i) {
      ASSERT_EQ(whole[i].size(), cpu_logits[i].size());
      worst = std::max(worst, relative_max_error(whole[i], cpu_logits[i]));
      unquantized = std::max(unquantized, relative_max_error(whole[i], gpu.logits[i].data));
    }
    const auto chunked = gpu_runner.prompt_logits({gpu.prompts.back()}, 4)[0];
    const double chunked_error = relative_max_error(chunked, cpu_logits.back());
    std::cout << GetParam() << " " << format << ": whole prompts " << worst << ", chunks of 4 " << chunked_error
              << " (against the unquantised transformers logits " << unquantized << ")\n";
    EXPECT_LE(worst, tolerance) << format << ", whole prompts";
    EXPECT_LE(chunked_error, tolerance) << format << ", chunks of 4";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaQuantizedModel,
                         ::testing::Values("llama_f32", "llama_bf16", "mistral_f32", "mistral_bf16", "qwen2_f32",
                                           "qwen2_bf16", "qwen3_f32", "qwen3_bf16"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace troupe

#endif  // TROUPE_HAVE_CUDA
