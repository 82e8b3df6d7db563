// Linear layers: the choice between the skinny GEMM (decode), the
// quantised kernels and oneDNN (prefill), and running them. Weight
// preparation is in cpu_linear_weights.cpp.

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

// Bytes of quantised weight rows one task owns when the activations need
// several passes (prefill): they stay in L2 while every pass reads them.
constexpr std::int64_t quantized_panel_bytes = std::int64_t{256} << 10;

}  // namespace

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
  activation_half_starts_.resize(static_cast<std::size_t>(x.rows * 2 * groups));
  std::int8_t* codes = activation_codes_.data() + (-reinterpret_cast<std::uintptr_t>(activation_codes_.data()) & 63);
  const std::int64_t per_task = rows_per_task(x.rows, x.cols, pool_.size());
  pool_.parallel_for(ceil_div(x.rows, per_task), [&](std::int64_t task, int) {
    for (std::int64_t r = task * per_task; r < std::min(x.rows, (task + 1) * per_task); ++r)
      kernels_.quantize_row(x.as<const float>() + r * x.row_stride, x.cols, padded, codes + r * padded,
                            activation_scales_.data() + r * groups, activation_sums_.data() + r * groups,
                            activation_code_sums_.data() + r * groups, activation_half_starts_.data() + r * 2 * groups);
  });
  const quantized_rows rows{codes,
                            activation_scales_.data(),
                            activation_sums_.data(),
                            activation_code_sums_.data(),
                            activation_half_starts_.data(),
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
