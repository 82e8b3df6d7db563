// Weight-only quantised linear layers: quantisation and packing at load
// (host threads, the CPU backend's quantiser), and the choice at run time
// between the fused GEMV (few rows) and bf16 slabs multiplied by cuBLASLt.

#include <algorithm>
#include <cstdint>
#include <future>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/cuda/cuda_backend_impl.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/quantization.hpp"
#include "kernels/stored_code_source.hpp"

namespace troupe::cuda {

namespace {

// Rows of a part one packing thread takes at least (the quantiser is cheap
// per row; fewer would spend more on threads than on work).
constexpr std::int64_t rows_per_packing_task = 256;
// Rows a packing thread reads, decodes or expands at a time (bounds its scratch).
constexpr std::int64_t rows_per_read = 64;
// Slabs start at multiples of this many rows (keeps outputs 128-byte aligned).
constexpr std::int64_t slab_row_multiple = 64;

// Rows [begin, begin + count) of `part` as rows from first_row + begin of
// `image`, whose inputs are in `order` (stacked_input_order), rows_per_read
// at a time: codes its checkpoint stores in the layout's format and that
// order, as they are; anything else (floats, a matrix expanded on demand,
// codes of another format or order) through the CPU quantiser, its columns
// gathered into that order first.
void pack_part_rows(const host_tensor& part, std::int64_t begin, std::int64_t count,
                    const quantized_device_layout& layout, void* image, std::int64_t first_row,
                    std::span<const std::int32_t> order) {
  const bool as_stored = part.stored_codes != nullptr && part.stored_codes->format() == layout.format &&
                         same_input_order(part.stored_codes->input_permutation(), order);
  for (std::int64_t at = begin; at < begin + count; at += rows_per_read) {
    const std::int64_t rows = std::min(rows_per_read, begin + count - at);
    if (as_stored) {
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows * layout.cols));
      std::vector<std::uint16_t> scales(static_cast<std::size_t>(rows * layout.groups)), offsets(scales.size());
      part.stored_codes->read_rows(at, rows, codes.data(), scales.data(), offsets.data());
      pack_stored_code_rows(codes.data(), scales.data(), offsets.data(), rows, layout, image, first_row + at);
    } else if (part.data != nullptr && order.empty()) {
      const std::size_t row_bytes = static_cast<std::size_t>(layout.cols) * dtype_size(part.type);
      pack_quantized_rows(static_cast<const char*>(part.data) + static_cast<std::size_t>(at) * row_bytes, part.type,
                          rows, layout, image, first_row + at);
    } else {
      const std::vector<float> values = matrix_rows_in_order(part, at, rows, order);
      pack_quantized_rows(values.data(), dtype::f32, rows, layout, image, first_row + at);
    }
  }
}

// Packs `part` as rows [first_row, first_row + rows) of `image`, in parallel.
void pack_part(const host_tensor& part, const quantized_device_layout& layout, void* image, std::int64_t first_row,
               std::span<const std::int32_t> order) {
  const std::int64_t rows = part.matrix_rows();
  const std::int64_t workers = std::clamp<std::int64_t>(
      std::min<std::int64_t>(std::thread::hardware_concurrency(), rows / rows_per_packing_task), 1, 16);
  const std::int64_t share = (rows + workers - 1) / workers;
  std::vector<std::future<void>> tasks;
  for (std::int64_t begin = 0; begin < rows; begin += share) {
    const std::int64_t count = std::min(share, rows - begin);
    tasks.push_back(std::async(std::launch::async, [=, &part, &layout] {
      pack_part_rows(part, begin, count, layout, image, first_row, order);
    }));
  }
  for (auto& task : tasks) task.get();
}

bool aligned_rows(const void* data, std::int64_t stride) {
  return reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && stride % 8 == 0;
}

}  // namespace

std::unique_ptr<linear_weight> cuda_backend::prepare_quantized_linear(std::span<const host_tensor> parts,
                                                                      std::span<const host_tensor> biases,
                                                                      weight_quantization format) {
  if (format == weight_quantization::none) return prepare_linear(parts, biases);
  // No kernels for scales per 16 inputs: GGUF Q6_K and Q3_K codes (int6,
  // int4_g16) are decoded (pack_part_rows' matrix_rows_in_order) and held as int8.
  if (quantization_half_group_scales(format)) format = weight_quantization::int8;
  const std::int64_t out_features = stacked_rows(parts, biases, "prepare_quantized_linear");
  auto weight =
      std::make_unique<cuda_quantized_weight>(device_layout_for(format, out_features, parts.front().matrix_cols()));
  const std::vector<std::int32_t> order = stacked_input_order(parts, format);
  std::vector<unsigned char> image(weight->layout.total_bytes, 0);
  std::int64_t row = 0;
  for (const host_tensor& part : parts) {
    pack_part(part, weight->layout, image.data(), row, order);
    row += part.matrix_rows();
  }
  if (!order.empty()) {
    weight->input_order = device_allocation(order.size() * sizeof(std::int32_t));
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(weight->input_order.data(), order.data(), order.size() * sizeof(std::int32_t),
                                      cudaMemcpyHostToDevice, compute_.get()));
  }
  weight->storage = device_allocation(image.size());
  TROUPE_CUDA_CHECK(
      cudaMemcpyAsync(weight->storage.data(), image.data(), image.size(), cudaMemcpyHostToDevice, compute_.get()));
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
  upload_biases(biases, out_features, weight->bias_f32, weight->bias_bf16);
  return weight;
}

void cuda_backend::quantized_linear(const gemm_problem& problem, const cuda_quantized_weight& weight) {
  const quantized_weight_view view = weight_view_of(weight.layout, weight.storage.data());
  const std::size_t out_element = dtype_size(problem.out_type);
  const auto* input_order = static_cast<const std::int32_t*>(weight.input_order.data());
  if (problem.m <= options_.quantized_gemv_max_rows) {
    // The GEMV reads whole groups of x with vector loads: rows must be
    // 16-byte aligned and zero past the last feature, else a padded copy
    // (which also gathers the inputs of act-order codes).
    const void* x = problem.x;
    std::int64_t x_stride = problem.x_stride;
    device_buffer padded;
    if (view.padded_cols != view.cols || !aligned_rows(x, x_stride) || input_order != nullptr) {
      padded = allocate(static_cast<std::size_t>(problem.m * view.padded_cols) * 2);
      launch_pad_rows({x, x_stride, padded.data(), view.padded_cols, problem.m, view.cols, input_order},
                      compute_.get());
      x = padded.data();
      x_stride = view.padded_cols;
    }
    for (std::int64_t first = 0; first < problem.m; first += gemv_max_rows) {
      quantized_gemv_params params;
      params.w = view;
      params.x = static_cast<const char*>(x) + static_cast<std::size_t>(first * x_stride) * 2;
      params.x_stride = x_stride;
      params.bias = static_cast<const float*>(weight.bias_f32.data());
      params.out = static_cast<char*>(problem.out) + static_cast<std::size_t>(first * problem.out_stride) * out_element;
      params.out_stride = problem.out_stride;
      params.out_type = problem.out_type;
      params.m = std::min(gemv_max_rows, problem.m - first);
      launch_quantized_gemv(params, compute_.get());
    }
    return;
  }
  // Many rows: expand slabs of weight rows to bf16 and let cuBLASLt multiply
  // them; the bias rides in the epilogue in the output's type.
  const std::int64_t fit =
      static_cast<std::int64_t>(options_.quantized_slab_bytes) / (2 * std::max<std::int64_t>(problem.k, 1));
  const std::int64_t slab_rows =
      std::min(problem.n, std::max(slab_row_multiple, fit / slab_row_multiple * slab_row_multiple));
  device_buffer scratch = allocate(static_cast<std::size_t>(slab_rows * problem.k) * 2);
  device_buffer gathered;
  gemm_problem ordered = problem;
  if (input_order != nullptr) {  // act-order codes: x's columns in their order
    gathered = allocate(static_cast<std::size_t>(problem.m * problem.k) * 2);
    launch_pad_rows({problem.x, problem.x_stride, gathered.data(), problem.k, problem.m, problem.k, input_order},
                    compute_.get());
    ordered.x = gathered.data();
    ordered.x_stride = problem.k;
  }
  const void* bias = problem.out_type == dtype::f32 ? weight.bias_f32.data() : weight.bias_bf16.data();
  for (std::int64_t first = 0; first < problem.n; first += slab_rows) {
    const std::int64_t rows = std::min(slab_rows, problem.n - first);
    launch_dequantize({view, first, rows, scratch.data()}, compute_.get());
    gemm_problem slab = ordered;
    slab.w = scratch.data();
    slab.n = rows;
    slab.out = static_cast<char*>(problem.out) + static_cast<std::size_t>(first) * out_element;
    slab.bias =
        bias == nullptr ? nullptr : static_cast<const char*>(bias) + static_cast<std::size_t>(first) * out_element;
    gemm_->run(slab, compute_.get());
  }
}

}  // namespace troupe::cuda
