// Linear layers: weight preparation (stacking, placement) and the choice
// between the skinny GEMM (decode) and oneDNN (prefill).

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

// Batch-invariant mode above this many rows runs the K-blocked skinny GEMM
// (same bits, more arithmetic per byte moved); at or below it weights are
// streamed once, as for decode.
constexpr std::int64_t invariant_blocked_min_rows = 32;
// K block: the 8 activation rows of a pass over this many bytes (1024 f32 or
// 2048 bf16 columns) stay in L1 while the weight tiles stream past.
constexpr std::int64_t invariant_slice_bytes = std::int64_t{32} << 10;
// Weight rows one task owns: about this many bytes (a multiple of 12 rows,
// so whole tiles), held in L2 while every activation row slice passes over
// them. Both measured best on Zen 5 at M = 512 (kernels/cpu/README.md).
constexpr std::int64_t invariant_panel_bytes = std::int64_t{512} << 10;

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

// Bytes of quantised weight rows one task owns when the activations need
// several passes (prefill): they stay in L2 while every pass reads them.
constexpr std::int64_t quantized_panel_bytes = std::int64_t{256} << 10;

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

void cpu_backend::linear(tensor_view x, const linear_weight& w, tensor_view out) {
  const auto* weight = dynamic_cast<const cpu_linear_weight*>(&w);
  require(weight != nullptr, "linear", "the weight was not prepared by the cpu backend");
  require(x.type == dtype::f32 && out.type == dtype::f32, "linear", "x and out must be f32");
  require(x.cols == weight->cols, "linear", "x columns differ from the weight's in_features");
  require(out.cols == weight->rows, "linear", "out columns differ from the weight's out_features");
  require(x.rows == out.rows, "linear", "x and out differ in rows");
  if (x.rows == 0 || weight->rows == 0) return;
  if (!weight->input_permutation.empty()) x = permuted_columns(x, weight->input_permutation);
  if (weight->quantized && (batch_invariant_ || x.rows <= quantized_gemv_max_rows_)) {
    // Every output row is computed on its own in one fixed order, so this
    // path is batch-invariant as it stands.
    linear_quantized(x, *weight, out);
  } else if (weight->quantized) {
    matmuls_->run(pool_, kernels_, x, *weight, out);  // dequantised to bf16 panels
  } else if (weight->panels) {
    linear_panels(x, *weight, out);  // batch-invariant as it stands
  } else if (batch_invariant_) {
    // The skinny GEMM computes every output element in the same order
    // whatever the row count, the row's place in a tile, the tile shape, the
    // K blocking or the thread that runs it; oneDNN promises no such thing.
    linear_skinny(x, *weight, out, x.rows > invariant_blocked_min_rows);
  } else if (x.rows <= skinny_row_limit(weight->type)) {
    linear_skinny(x, *weight, out, false);
  } else {
    matmuls_->run(pool_, kernels_, x, *weight, out);
  }
}

int default_quantized_gemv_max_rows(isa_level level) {
  // Where the integer kernels hand over to dequantised oneDNN panels: the
  // crossovers `troupe bench-kernels --sections quantized` measured (it prints
  // both paths). With VNNI the integer GEMM wins at every row count, against
  // oneDNN in f32 (Cascade Lake) and in bf16 (Zen 4: 1.4-1.5× at 512 rows,
  // 2.2-3.5× at 64-128); without VNNI (maddubs) the f32 GEMM wins past about
  // 128 rows.
  switch (level) {
    case isa_level::avx512_vnni:
    case isa_level::avx512_bf16:
      return std::numeric_limits<int>::max();
    default:
      return 128;
  }
}

int cpu_backend::skinny_row_limit(dtype weights) const {
  if (gemv_max_rows_ >= 0) return gemv_max_rows_;
  const bool onednn_bf16 = weights == dtype::bf16 && isa_ >= isa_level::avx512_bf16;
  return onednn_bf16 ? default_gemv_max_rows_bf16 : default_gemv_max_rows_other;
}

const std::uint16_t* cpu_backend::round_rows_to_bf16(tensor_view x, std::int64_t& stride) {
  // Rows one cache line longer than whole lines: rows a multiple of 4 KiB
  // apart would all fall in one L1 set, and a pass reads 8 of them at once.
  stride = ceil_div(x.cols, 32) * 32 + 32;
  activations_bf16_.resize(static_cast<std::size_t>(x.rows * stride));
  const std::int64_t per_task = rows_per_task(x.rows, x.cols, pool_.size());
  pool_.parallel_for(ceil_div(x.rows, per_task), [&](std::int64_t task, int) {
    for (std::int64_t r = task * per_task; r < std::min(x.rows, (task + 1) * per_task); ++r)
      kernels_.from_f32(x.as<const float>() + r * x.row_stride, activations_bf16_.data() + r * stride, elem::bf16,
                        x.cols);
  });
  return activations_bf16_.data();
}

void cpu_backend::linear_skinny(tensor_view x, const cpu_linear_weight& w, tensor_view out, bool k_blocked) {
  gemv_args args;
  args.weights = w.data;
  args.weight_type = static_cast<elem>(w.type);
  args.k = w.cols;
  args.bias = w.bias.empty() ? nullptr : w.bias.data();
  args.x = x.as<const float>();
  args.x_stride = x.row_stride;
  args.out = out.as<float>();
  args.out_stride = out.row_stride;
  if (w.type == dtype::bf16 && kernels_.bf16_dot) args.x_bf16 = round_rows_to_bf16(x, args.x_bf16_stride);
  // Tasks: contiguous runs of weight rows, a few per thread so a stalled
  // thread is covered. Blocked runs are sized to stay in L2 and, when they
  // are too few to go round, the activation rows are split into blocks too.
  const std::int64_t wanted = 4 * pool_.size();
  std::int64_t run_length = std::max<std::int64_t>(16, ceil_div(w.rows, wanted) / 8 * 8);
  std::int64_t block_rows = x.rows;
  if (k_blocked) {
    const auto row_bytes = static_cast<std::int64_t>(w.cols * dtype_size(w.type));
    run_length = std::max<std::int64_t>(12, invariant_panel_bytes / row_bytes / 12 * 12);
    const std::int64_t row_blocks = std::max<std::int64_t>(1, wanted / ceil_div(w.rows, run_length));
    block_rows = ceil_div(ceil_div(x.rows, row_blocks), 8) * 8;
    const std::int64_t x_element_bytes = args.x_bf16 != nullptr ? 2 : 4;
    args.k_block = std::max<std::int64_t>(32, invariant_slice_bytes / 8 / x_element_bytes / 32 * 32);
    scratch_.reserve(gemv_accumulator_floats(run_length));
  }
  const std::int64_t runs = ceil_div(w.rows, run_length), row_blocks = ceil_div(x.rows, block_rows);
  pool_.parallel_for(runs * row_blocks, [&](std::int64_t task, int thread) {
    const std::int64_t first_row = task % row_blocks * block_rows, run = task / row_blocks;
    gemv_args slice = args;
    select_rows(slice, first_row, std::min(block_rows, x.rows - first_row));
    slice.n_begin = run * run_length;
    slice.n_end = std::min(w.rows, slice.n_begin + run_length);
    if (k_blocked) slice.accumulators = scratch_.get(thread);
    kernels_.gemv(slice);
  });
}

tensor_view cpu_backend::permuted_columns(tensor_view x, std::span<const std::int32_t> permutation) {
  permuted_x_.resize(x.element_count());
  const std::int64_t per_task = rows_per_task(x.rows, x.cols, pool_.size());
  pool_.parallel_for(ceil_div(x.rows, per_task), [&](std::int64_t task, int) {
    for (std::int64_t r = task * per_task; r < std::min(x.rows, (task + 1) * per_task); ++r) {
      const float* row = x.as<const float>() + r * x.row_stride;
      float* gathered = permuted_x_.data() + r * x.cols;
      for (std::int64_t j = 0; j < x.cols; ++j) gathered[j] = row[permutation[static_cast<std::size_t>(j)]];
    }
  });
  return {permuted_x_.data(), dtype::f32, x.rows, x.cols, x.cols};
}

void cpu_backend::linear_quantized(tensor_view x, const cpu_linear_weight& w, tensor_view out) {
  const std::int64_t padded = w.packed.padded_cols, groups = padded / quant_group;
  activation_codes_.resize(static_cast<std::size_t>(x.rows * padded + 64));
  activation_scales_.resize(static_cast<std::size_t>(x.rows * groups));
  activation_sums_.resize(static_cast<std::size_t>(x.rows * groups));
  activation_code_sums_.resize(static_cast<std::size_t>(x.rows * groups));
  std::int8_t* codes = activation_codes_.data() + (-reinterpret_cast<std::uintptr_t>(activation_codes_.data()) & 63);
  const std::int64_t per_task = rows_per_task(x.rows, x.cols, pool_.size());
  pool_.parallel_for(ceil_div(x.rows, per_task), [&](std::int64_t task, int) {
    for (std::int64_t r = task * per_task; r < std::min(x.rows, (task + 1) * per_task); ++r)
      kernels_.quantize_row(x.as<const float>() + r * x.row_stride, x.cols, padded, codes + r * padded,
                            activation_scales_.data() + r * groups, activation_sums_.data() + r * groups,
                            activation_code_sums_.data() + r * groups);
  });
  const quantized_rows rows{codes, activation_scales_.data(), activation_sums_.data(), activation_code_sums_.data(),
                            padded};
  qgemv_args args;
  args.weights = &w.packed;
  args.x = &rows;
  args.bias = w.bias.empty() ? nullptr : w.bias.data();
  args.m_rows = x.rows;
  args.out = out.as<float>();
  args.out_stride = out.row_stride;
  // Runs of weight rows claimed one at a time. At up to 8 rows (one pass,
  // bandwidth-bound) 16 runs per thread, so the thread that finishes first
  // waits for at most a short run (4 left a thread idle for about 8% of a
  // batch-1 step, perf); with more than one pass over the activations, runs
  // small enough to stay in L2 between passes.
  const std::int64_t runs_per_thread = x.rows <= 8 ? 16 : 4;
  std::int64_t run_length = std::max<std::int64_t>(8, ceil_div(w.rows, runs_per_thread * pool_.size()) / 8 * 8);
  if (x.rows > 8) {
    const auto row_bytes = static_cast<std::int64_t>(
        layout_for(static_cast<weight_quantization>(w.packed.format), w.rows, w.cols).row_code_bytes);
    run_length = std::clamp<std::int64_t>(quantized_panel_bytes / row_bytes / 8 * 8, 8, run_length);
  }
  // The tiles of 4- and 5-bit weights expand their codes into a scratch of each thread's.
  const bool expanded_codes = x.rows > 8 && w.packed.format != qformat::int8;
  if (expanded_codes && code_scratch_.size() < static_cast<std::size_t>(pool_.size())) {
    code_scratch_.resize(static_cast<std::size_t>(pool_.size()));
    for (auto& scratch : code_scratch_) scratch.resize(static_cast<std::size_t>(quant_tile_scratch_bytes + 64));
  }
  pool_.parallel_for(ceil_div(w.rows, run_length), [&](std::int64_t task, int thread) {
    qgemv_args slice = args;
    slice.n_begin = task * run_length;
    slice.n_end = std::min(w.rows, slice.n_begin + run_length);
    if (expanded_codes) {
      std::uint8_t* scratch = code_scratch_[static_cast<std::size_t>(thread)].data();
      slice.code_scratch = scratch + (-reinterpret_cast<std::uintptr_t>(scratch) & 63);
    }
    kernels_.qgemv(slice);
  });
}

}  // namespace troupe::cpu
