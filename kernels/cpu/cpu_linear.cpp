// Linear layers: weight preparation (stacking, placement) and the choice
// between the skinny GEMM (decode) and oneDNN (prefill).

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_backend_impl.hpp"
#include "kernels/cpu/onednn_matmuls.hpp"

namespace troupe::cpu {

namespace {

void check_parts(std::span<const host_tensor> parts, std::span<const host_tensor> biases) {
  if (parts.empty()) throw std::invalid_argument("prepare_linear: needs at least one weight part");
  const std::int64_t in = parts.front().matrix_cols();
  for (const host_tensor& part : parts) {
    if (part.shape.size() != 2)
      throw std::invalid_argument("prepare_linear: weight " + part.name + " must be two-dimensional [out, in]");
    if (part.shape[1] != in)
      throw std::invalid_argument("prepare_linear: weight " + part.name + " has " + std::to_string(part.shape[1]) +
                                  " input features where " + parts.front().name + " has " + std::to_string(in));
    if (part.data == nullptr && part.numel() > 0)
      throw std::invalid_argument("prepare_linear: weight " + part.name + " has no data");
  }
  if (!biases.empty() && biases.size() != parts.size())
    throw std::invalid_argument("prepare_linear: give one bias per weight part or none");
  for (std::size_t i = 0; i < biases.size(); ++i) {
    if (biases[i].numel() != parts[i].shape[0] || biases[i].data == nullptr)
      throw std::invalid_argument("prepare_linear: bias " + biases[i].name + " does not match " + parts[i].name + " (" +
                                  std::to_string(parts[i].shape[0]) + " outputs)");
  }
}

}  // namespace

std::unique_ptr<linear_weight> cpu_backend::prepare_linear(std::span<const host_tensor> parts,
                                                           std::span<const host_tensor> biases) {
  check_parts(parts, biases);
  auto weight = std::make_unique<cpu_linear_weight>();
  weight->cols = parts.front().shape[1];
  const bool same_type =
      std::all_of(parts.begin(), parts.end(), [&](const host_tensor& p) { return p.type == parts.front().type; });
  weight->type = same_type ? parts.front().type : dtype::f32;
  for (const host_tensor& part : parts) weight->rows += part.shape[0];
  if (placement_ == weight_placement::mapped && parts.size() == 1) {
    weight->data = parts.front().data;
  } else {
    const std::size_t row_bytes = static_cast<std::size_t>(weight->cols) * dtype_size(weight->type);
    weight->storage = allocate(static_cast<std::size_t>(weight->rows) * row_bytes);
    char* dst = static_cast<char*>(weight->storage.data());
    for (const host_tensor& part : parts) {
      if (part.type == weight->type) {
        copy_parallel(dst, part.data, part.byte_size());
      } else {
        convert_elements(part.data, part.type, dst, weight->type, static_cast<std::size_t>(part.numel()));
      }
      dst += static_cast<std::size_t>(part.shape[0]) * row_bytes;
    }
    weight->data = weight->storage.data();
  }
  if (!biases.empty()) {
    weight->bias.resize(static_cast<std::size_t>(weight->rows));
    float* dst = weight->bias.data();
    for (const host_tensor& bias : biases) {
      convert_elements(bias.data, bias.type, dst, dtype::f32, static_cast<std::size_t>(bias.numel()));
      dst += bias.numel();
    }
  }
  return weight;
}

void cpu_backend::linear(tensor_view x, const linear_weight& w, tensor_view out) {
  const auto* weight = dynamic_cast<const cpu_linear_weight*>(&w);
  require(weight != nullptr, "linear", "the weight was not prepared by the cpu backend");
  require(x.type == dtype::f32 && out.type == dtype::f32, "linear", "x and out must be f32");
  require(x.cols == weight->cols, "linear", "x columns differ from the weight's in_features");
  require(out.cols == weight->rows, "linear", "out columns differ from the weight's out_features");
  require(x.rows == out.rows, "linear", "x and out differ in rows");
  if (x.rows == 0 || weight->rows == 0) return;
  if (x.rows <= skinny_row_limit(weight->type)) {
    linear_skinny(x, *weight, out);
  } else {
    matmuls_->run(pool_, kernels_, x, *weight, out);
  }
}

int cpu_backend::skinny_row_limit(dtype weights) const {
  if (gemv_max_rows_ >= 0) return gemv_max_rows_;
  const bool onednn_bf16 = weights == dtype::bf16 && isa_ >= isa_level::avx512_bf16;
  return onednn_bf16 ? default_gemv_max_rows_bf16 : default_gemv_max_rows_other;
}

void cpu_backend::linear_skinny(tensor_view x, const cpu_linear_weight& w, tensor_view out) {
  gemv_args args;
  args.weights = w.data;
  args.weight_type = static_cast<elem>(w.type);
  args.k = w.cols;
  args.bias = w.bias.empty() ? nullptr : w.bias.data();
  args.x = x.as<const float>();
  args.x_stride = x.row_stride;
  args.m_rows = x.rows;
  args.out = out.as<float>();
  args.out_stride = out.row_stride;
  if (w.type == dtype::bf16 && kernels_.bf16_dot) {
    activations_bf16_.resize(static_cast<std::size_t>(x.rows * w.cols));
    for (std::int64_t r = 0; r < x.rows; ++r)
      kernels_.from_f32(args.x + r * x.row_stride, activations_bf16_.data() + r * w.cols, elem::bf16, w.cols);
    args.x_bf16 = activations_bf16_.data();
  }
  // Contiguous runs of output rows, a few per thread so a stalled thread is covered.
  const std::int64_t per_task =
      std::max<std::int64_t>(16, (w.rows + 4 * pool_.size() - 1) / (4 * pool_.size()) / 8 * 8);
  const std::int64_t tasks = (w.rows + per_task - 1) / per_task;
  pool_.parallel_for(tasks, [&](std::int64_t task, int) {
    gemv_args slice = args;
    slice.n_begin = task * per_task;
    slice.n_end = std::min(w.rows, slice.n_begin + per_task);
    kernels_.gemv(slice);
  });
}

}  // namespace troupe::cpu
