#pragma once
// bf16 weights in output panels (layout: isa_kernels.hpp, bf16_panel_rows):
// the size of a packed weight and the packing of one panel, plus the plain
// reading of a packed element that the tests check the kernel against.

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu/isa_kernels.hpp"

namespace troupe::cpu {

/// Panels of a weight with `rows` output rows.
inline std::int64_t bf16_panel_count(std::int64_t rows) { return (rows + bf16_panel_rows - 1) / bf16_panel_rows; }

/// bf16 elements of one panel of a weight with `cols` inputs (cols padded to even).
inline std::int64_t bf16_panel_elements(std::int64_t cols) { return (cols + 1) / 2 * 2 * bf16_panel_rows; }

/// Bytes of a rows × cols bf16 weight in panels (rows padded to whole
/// panels, cols to an even count).
std::size_t bf16_panel_bytes(std::int64_t rows, std::int64_t cols);

/// Writes one panel: `rows[r]` points at the `cols` bf16 values of the
/// panel's row r, for r < rows.size() <= bf16_panel_rows; the rows past
/// them, and the odd half past an odd `cols`, become zero.
void pack_bf16_panel(std::span<const std::uint16_t* const> rows, std::int64_t cols, std::uint16_t* panel);

/// The bf16 bits of weight (row, col) in the packed weight at `panels`.
std::uint16_t bf16_panel_element(const std::uint16_t* panels, std::int64_t cols, std::int64_t row, std::int64_t col);

}  // namespace troupe::cpu
