#include "kernels/cpu/bf16_panels.hpp"

#include <algorithm>

namespace troupe::cpu {
namespace {

std::int64_t pair_count(std::int64_t cols) { return (cols + 1) / 2; }

// Input pairs packed per sweep over the panel's rows: 64 rows × 32 pairs
// read (8 KiB at most) and written (8 KiB) stay in L1.
constexpr std::int64_t pairs_per_sweep = 32;

}  // namespace

std::size_t bf16_panel_bytes(std::int64_t rows, std::int64_t cols) {
  return static_cast<std::size_t>(bf16_panel_count(rows) * bf16_panel_elements(cols)) * sizeof(std::uint16_t);
}

void pack_bf16_panel(std::span<const std::uint16_t* const> rows, std::int64_t cols, std::uint16_t* panel) {
  const std::int64_t pairs = pair_count(cols);
  for (std::int64_t first = 0; first < pairs; first += pairs_per_sweep) {
    const std::int64_t last = std::min(pairs, first + pairs_per_sweep);
    for (std::int64_t r = 0; r < bf16_panel_rows; ++r) {
      const std::uint16_t* row =
          r < static_cast<std::int64_t>(rows.size()) ? rows[static_cast<std::size_t>(r)] : nullptr;
      for (std::int64_t j = first; j < last; ++j) {
        std::uint16_t* slot = panel + (j * bf16_panel_rows + r) * 2;
        slot[0] = row != nullptr ? row[2 * j] : 0;
        slot[1] = row != nullptr && 2 * j + 1 < cols ? row[2 * j + 1] : 0;
      }
    }
  }
}

std::uint16_t bf16_panel_element(const std::uint16_t* panels, std::int64_t cols, std::int64_t row, std::int64_t col) {
  const std::int64_t panel = row / bf16_panel_rows;
  return panels[panel * bf16_panel_elements(cols) + col / 2 * 2 * bf16_panel_rows + row % bf16_panel_rows * 2 +
                col % 2];
}

}  // namespace troupe::cpu
