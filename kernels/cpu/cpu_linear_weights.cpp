// Linear layers' weights: parts stacked along the output dimension,
// placed (mapped, copied or packed into panels) or quantised at load into
// the layouts the kernels read (cpu_linear.cpp runs them).

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_backend_impl.hpp"
#include "kernels/cpu/onednn_matmuls.hpp"
#include "kernels/cpu/quantized_weights.hpp"
#include "kernels/row_source.hpp"
#include "kernels/stored_code_source.hpp"

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
    if (part.data == nullptr && part.stored_codes == nullptr && part.rows == nullptr && part.numel() > 0)
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

// A part kept in its checkpoint's 4-bit form can only become that format.
// A part kept in 4 bits packs into its own format, or is decoded into int8
// (a caller asking for int8 over kept codes).
void check_stored_code_parts(std::span<const host_tensor> parts, weight_quantization format) {
  for (const host_tensor& part : parts) {
    if (part.stored_codes == nullptr) continue;
    if (part.stored_codes->format() != format && format != weight_quantization::int8)
      throw std::invalid_argument("prepare_linear: weight " + part.name + " is stored as " +
                                  std::string(quantization_name(part.stored_codes->format())) + ", not " +
                                  std::string(quantization_name(format)));
    if (part.shape[1] % stored_code_group != 0)
      throw std::invalid_argument("prepare_linear: weight " + part.name + " has " + std::to_string(part.shape[1]) +
                                  " input features, not whole groups of 32");
  }
}

// True when the weight's group scales are held as block factors: every
// part keeps its codes as stored in `format` with block factors (GGUF
// Q4_K / Q5_K, IQ4_XS), which the weight then holds exactly (40 bytes a row
// per 512 inputs where f16 group scales and offsets take 64); or the format
// is int4 and every part is quantised here, to signed byte scale codes
// under an f16 factor per 256 inputs (20 bytes where f16 scales take 32).
// One part of any other kind (int4 codes a checkpoint stores with f16
// scales) puts the whole weight in f16 scales.
bool all_block_factored(std::span<const host_tensor> parts, weight_quantization format,
                        std::span<const std::int32_t> order) {
  const auto stored_with_factors = [&](const host_tensor& part) {
    return part.stored_codes != nullptr && part.stored_codes->format() == format &&
           part.stored_codes->has_block_factors() && part.shape[1] % stored_code_factor_block == 0 &&
           same_input_order(part.stored_codes->input_permutation(), order);
  };
  // (A stored int4 part's codes are int4: check_stored_code_parts refused any other format.)
  const auto quantized_here = [&](const host_tensor& part) {
    return format == weight_quantization::int4 &&
           (part.stored_codes == nullptr || !same_input_order(part.stored_codes->input_permutation(), order));
  };
  return (format != weight_quantization::int8 && std::all_of(parts.begin(), parts.end(), stored_with_factors)) ||
         std::all_of(parts.begin(), parts.end(), quantized_here);
}

// Rows [begin, begin + count) of `part` into the quantised `buffer` from row
// `first_row` on, whose inputs are in `order` (stacked_input_order): 4-bit
// codes in that order and the layout's format are repacked as they are
// (kept 4-bit codes going into int8 are decoded); anything else is quantised
// to nearest, its columns gathered into that order first. A stacked part
// whose act-order permutation differs from the first one's (AutoGPTQ
// derives q/k/v's, and gate/up's, from the same input, so they agree) thus
// costs requantisation, not a wrong result.
void quantize_part_rows(const host_tensor& part, std::int64_t begin, std::int64_t count, const quantized_layout& layout,
                        void* buffer, std::int64_t first_row, std::span<const std::int32_t> order) {
  if (part.stored_codes != nullptr && part.stored_codes->format() == layout.format &&
      same_input_order(part.stored_codes->input_permutation(), order)) {
    pack_source_rows(*part.stored_codes, begin, count, layout, buffer, first_row + begin);
    return;
  }
  if (part.stored_codes == nullptr && part.rows == nullptr && order.empty()) {
    const std::size_t row_bytes = static_cast<std::size_t>(layout.cols) * dtype_size(part.type);
    quantize_rows(static_cast<const char*>(part.data) + static_cast<std::size_t>(begin) * row_bytes, part.type, count,
                  layout, buffer, first_row + begin);
    return;
  }
  const std::vector<float> ordered = matrix_rows_in_order(part, begin, count, order);
  quantize_rows(ordered.data(), dtype::f32, count, layout, buffer, first_row + begin);
}

std::vector<float> stacked_biases(std::span<const host_tensor> biases, std::int64_t rows) {
  std::vector<float> out;
  if (biases.empty()) return out;
  out.resize(static_cast<std::size_t>(rows));
  float* dst = out.data();
  for (const host_tensor& bias : biases) {
    convert_elements(bias.data, bias.type, dst, dtype::f32, static_cast<std::size_t>(bias.numel()));
    dst += bias.numel();
  }
  return out;
}

// Rows of a weight that one quantisation task converts.
constexpr std::int64_t quantize_task_rows = 64;

// Zeroes a fresh quantised buffer (padding and alignment gaps are never
// written) in 4 MiB chunks across the pool: the first touch of its pages,
// which the kernel clears, is most of the cost, and one thread paid all of
// it before the parallel quantisation started.
void zero_parallel(thread_pool& pool, void* data, std::size_t bytes) {
  constexpr std::size_t chunk = std::size_t{4} << 20;
  pool.parallel_for(static_cast<std::int64_t>((bytes + chunk - 1) / chunk), [&](std::int64_t task, int) {
    const std::size_t begin = static_cast<std::size_t>(task) * chunk;
    std::memset(static_cast<char*>(data) + begin, 0, std::min(chunk, bytes - begin));
  });
}

// `part` (rows set) expanded whole into its `type`, 64 rows a task on the pool.
std::unique_ptr<std::byte[]> expand_part(thread_pool& pool, const host_tensor& part) {
  auto out = std::make_unique_for_overwrite<std::byte[]>(part.byte_size());
  const std::int64_t rows = part.shape[0], cols = part.shape[1];
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_size(part.type);
  pool.parallel_for(ceil_div(rows, quantize_task_rows), [&](std::int64_t task, int) {
    const std::int64_t begin = task * quantize_task_rows, count = std::min(quantize_task_rows, rows - begin);
    const std::vector<float> values = matrix_rows_as_f32(part, begin, count);
    convert_elements(values.data(), dtype::f32, out.get() + static_cast<std::size_t>(begin) * row_bytes, part.type,
                     values.size());
  });
  return out;
}

}  // namespace

std::unique_ptr<linear_weight> cpu_backend::prepare_linear(std::span<const host_tensor> parts,
                                                           std::span<const host_tensor> biases) {
  check_parts(parts, biases);
  for (const host_tensor& part : parts) {
    if (part.stored_codes != nullptr)
      throw std::invalid_argument("prepare_linear: weight " + part.name + " is stored as " +
                                  std::to_string(quantization_code_bits(part.stored_codes->format())) +
                                  "-bit codes; prepare it as " +
                                  std::string(quantization_name(part.stored_codes->format())));
  }
  // A part its checkpoint expands on demand (host_tensor::rows) is expanded
  // here whole, into scratch this weight then copies or packs from.
  std::vector<host_tensor> whole(parts.begin(), parts.end());
  std::vector<std::unique_ptr<std::byte[]>> expanded;
  for (host_tensor& part : whole) {
    if (part.rows == nullptr) continue;
    expanded.push_back(expand_part(pool_, part));
    part.data = expanded.back().get();
    part.rows = nullptr;
  }
  parts = whole;
  auto weight = std::make_unique<cpu_linear_weight>();
  weight->cols = parts.front().shape[1];
  const bool same_type =
      std::all_of(parts.begin(), parts.end(), [&](const host_tensor& p) { return p.type == parts.front().type; });
  weight->type = same_type ? parts.front().type : dtype::f32;
  for (const host_tensor& part : parts) weight->rows += part.shape[0];
  if (placement_ == weight_placement::mapped && parts.size() == 1 && expanded.empty()) {
    weight->data = parts.front().data;
  } else if (weight->type == dtype::bf16 && bf16_panels_ && kernels_.bf16_panel_gemm != nullptr) {
    pack_panels(parts, *weight);
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
  weight->bias = stacked_biases(biases, weight->rows);
  return weight;
}

std::unique_ptr<linear_weight> cpu_backend::prepare_quantized_linear(std::span<const host_tensor> parts,
                                                                     std::span<const host_tensor> biases,
                                                                     weight_quantization format) {
  if (format == weight_quantization::none) return prepare_linear(parts, biases);
  check_parts(parts, biases);
  check_stored_code_parts(parts, format);
  auto weight = std::make_unique<cpu_linear_weight>();
  weight->cols = parts.front().shape[1];
  for (const host_tensor& part : parts) weight->rows += part.shape[0];
  weight->input_permutation = stacked_input_order(parts, format);
  const quantized_layout layout =
      layout_for(format, weight->rows, weight->cols, all_block_factored(parts, format, weight->input_permutation));
  weight->storage = allocate(layout.total_bytes);
  zero_parallel(pool_, weight->storage.data(), layout.total_bytes);
  std::int64_t first_row = 0;
  for (const host_tensor& part : parts) {
    const std::int64_t rows = part.shape[0];
    pool_.parallel_for(ceil_div(rows, quantize_task_rows), [&](std::int64_t task, int) {
      const std::int64_t begin = task * quantize_task_rows, count = std::min(quantize_task_rows, rows - begin);
      quantize_part_rows(part, begin, count, layout, weight->storage.data(), first_row, weight->input_permutation);
    });
    first_row += rows;
  }
  weight->quantized = true;
  weight->type = dtype::bf16;  // what the oneDNN path computes in
  weight->packed = view_of(layout, weight->storage.data());
  weight->data = weight->storage.data();
  weight->bias = stacked_biases(biases, weight->rows);
  return weight;
}

}  // namespace troupe::cpu
