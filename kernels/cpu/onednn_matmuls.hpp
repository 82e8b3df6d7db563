#pragma once
// The oneDNN path of `linear` for many activation rows (prefill). Each pool
// thread runs single-threaded oneDNN matmuls on its own panel of output
// columns, so oneDNN never starts OpenMP threads that would spin beside the
// pool. Primitives use a runtime M and runtime strides, so one primitive per
// (panel width, K, types, bias) serves every chunk size; they are created
// once and cached.

#include <memory>

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/tensor.hpp"

namespace troupe::cpu {

class cpu_linear_weight;
struct panel_plan;

class onednn_matmuls {
 public:
  /// `bf16_compute`: run bf16 weights as bf16 × bf16 → f32 (AVX-512 BF16);
  /// otherwise bf16 and f16 weights are widened to f32 panel by panel.
  onednn_matmuls(int threads, bool bf16_compute);
  ~onednn_matmuls();
  onednn_matmuls(const onednn_matmuls&) = delete;
  onednn_matmuls& operator=(const onednn_matmuls&) = delete;

  /// out[M, N] = x[M, K] · wᵀ (+ bias), f32 activations and output.
  void run(thread_pool& pool, const isa_kernels& kernels, tensor_view x, const cpu_linear_weight& w, tensor_view out);

 private:
  struct state;
  /// x rounded to bf16 into the state's buffer, [M][K] packed.
  void round_activations(thread_pool& pool, const isa_kernels& kernels, tensor_view x);
  /// One task: output columns [task * width, ...) on pool thread `thread`.
  void run_panel(const panel_plan& plan, const isa_kernels& kernels, tensor_view x, const cpu_linear_weight& w,
                 tensor_view out, std::int64_t task, int thread);

  std::unique_ptr<state> state_;
};

}  // namespace troupe::cpu
