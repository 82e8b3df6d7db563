// bf16 weights in output panels: packing at prepare time and the parallel
// split of the panel GEMM (kernels/cpu/panel_gemm_impl.hpp).

#include <algorithm>
#include <vector>

#include "kernels/cpu/bf16_panels.hpp"
#include "kernels/cpu/cpu_backend_impl.hpp"
#include "kernels/cpu/cpu_features.hpp"

namespace troupe::cpu {
namespace {

// Rows of one row block when the panels alone are too few to go round: a
// multiple of the AVX-512 kernels' 6-row tile (AVX2's 4-row tiles split a
// block 4 + 2).
constexpr std::int64_t row_block_multiple = 6;

}  // namespace

bool bf16_panels_at(isa_level level) { return kernels_for(level).bf16_panel_gemm != nullptr; }

void cpu_backend::pack_panels(std::span<const host_tensor> parts, cpu_linear_weight& weight) {
  std::vector<const std::uint16_t*> rows;  // the stacked matrix's rows
  rows.reserve(static_cast<std::size_t>(weight.rows));
  for (const host_tensor& part : parts) {
    const auto* first = static_cast<const std::uint16_t*>(part.data);
    for (std::int64_t r = 0; r < part.shape[0]; ++r) rows.push_back(first + r * weight.cols);
  }
  const std::size_t bytes = bf16_panel_bytes(weight.rows, weight.cols);
  weight.storage = allocate(bytes);
  auto* panels = static_cast<std::uint16_t*>(weight.storage.data());
  const auto panel_elements = static_cast<std::size_t>(bf16_panel_elements(weight.cols));
  pool_.parallel_for(bf16_panel_count(weight.rows), [&](std::int64_t p, int) {
    const std::int64_t first = p * bf16_panel_rows, count = std::min(bf16_panel_rows, weight.rows - first);
    pack_bf16_panel(std::span(rows).subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(count)),
                    weight.cols, panels + static_cast<std::size_t>(p) * panel_elements);
  });
  weight.data = panels;
  weight.panels = true;
}

void cpu_backend::linear_panels(tensor_view x, const cpu_linear_weight& w, tensor_view out) {
  panel_gemm_args args{.panels = static_cast<const std::uint16_t*>(w.data),
                       .k = w.cols,
                       .n_rows = w.rows,
                       .bias = w.bias.empty() ? nullptr : w.bias.data(),
                       .x = x.as<const float>(),
                       .x_stride = x.row_stride,
                       .out = out.as<float>(),
                       .out_stride = out.row_stride};
  if (kernels_.bf16_dot) args.x_bf16 = round_rows_to_bf16(x, args.x_bf16_stride);
  // Tasks: runs of panels, a few per thread so a stalled thread is covered;
  // when the panels are fewer than that, blocks of activation rows as well.
  const std::int64_t wanted = 4 * pool_.size(), panels = bf16_panel_count(w.rows);
  const std::int64_t run_length = std::max<std::int64_t>(1, panels / wanted);
  const std::int64_t runs = ceil_div(panels, run_length);
  const std::int64_t row_blocks =
      std::min(ceil_div(x.rows, row_block_multiple), std::max<std::int64_t>(1, wanted / runs));
  const std::int64_t block_rows = ceil_div(ceil_div(x.rows, row_blocks), row_block_multiple) * row_block_multiple;
  const std::int64_t blocks = ceil_div(x.rows, block_rows);
  pool_.parallel_for(runs * blocks, [&](std::int64_t task, int) {
    const std::int64_t first_row = task % blocks * block_rows, run = task / blocks;
    panel_gemm_args slice = args;
    select_rows(slice, first_row, std::min(block_rows, x.rows - first_row));
    slice.panel_begin = run * run_length;
    slice.panel_end = std::min(panels, slice.panel_begin + run_length);
    kernels_.bf16_panel_gemm(slice);
  });
}

}  // namespace troupe::cpu
