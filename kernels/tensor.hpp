#pragma once
// Views of memory the backends compute on, and tensors read from checkpoints.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/quantization.hpp"

namespace troupe {

class stored_code_source;
class row_source;

/// A 2-D strided view of backend memory (host memory on cpu, device memory on
/// cuda): `rows` × `cols` elements of `type`; row r starts `r * row_stride`
/// elements after `data`. A 1-D vector is a view with rows == 1.
struct tensor_view {
  void* data = nullptr;
  dtype type = dtype::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;  ///< elements between consecutive rows

  /// Rows [first, first + count).
  tensor_view row_slice(std::int64_t first, std::int64_t count) const {
    return {byte_offset(first * row_stride), type, count, cols, row_stride};
  }
  /// Columns [first, first + count) of every row (stride unchanged).
  tensor_view col_slice(std::int64_t first, std::int64_t count) const {
    return {byte_offset(first), type, rows, count, row_stride};
  }
  /// True when rows are packed back to back.
  bool contiguous() const { return row_stride == cols || rows <= 1; }
  std::size_t element_count() const { return static_cast<std::size_t>(rows * cols); }

  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }

 private:
  void* byte_offset(std::int64_t elements) const {
    return static_cast<char*>(data) + elements * static_cast<std::int64_t>(dtype_size(type));
  }
};

/// A packed row-major view: rows × cols elements starting at `data`.
inline tensor_view make_view(void* data, dtype type, std::int64_t rows, std::int64_t cols) {
  return {data, type, rows, cols, cols};
}

/// A tensor as stored in a checkpoint: read-only host bytes (often inside a
/// memory-mapped file) with its HF name and shape.
struct host_tensor {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  /// Set (and `data` null) for a [out, in] matrix kept in its checkpoint's
  /// 4- or 5-bit codes (kernels/stored_code_source.hpp); `type` is then what it expands to.
  std::shared_ptr<const stored_code_source> stored_codes;
  /// Set (and `data` null) for a [out, in] matrix its checkpoint expands row
  /// block by row block as the backend prepares it (kernels/row_source.hpp);
  /// `type` is what it expands to.
  std::shared_ptr<const row_source> rows;
  /// Bits a weight needs on a linear grid to hold what its checkpoint
  /// stored (a GGUF Q8_0 or IQ4: 8, Q6_K: 6, Q5: 5, a 4-bit block: 4); 0
  /// for a tensor stored as floats.
  int stored_bits = 0;

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  std::size_t byte_size() const { return static_cast<std::size_t>(numel()) * dtype_size(type); }
  /// Rows × columns as a 2-D matrix (a 1-D tensor is one row).
  std::int64_t matrix_rows() const { return shape.size() <= 1 ? 1 : shape[0]; }
  std::int64_t matrix_cols() const { return shape.empty() ? 1 : shape.back(); }
};

/// Rows [begin, begin + count) of the [rows][cols] matrix `part` as f32
/// [count][cols], every weight at its natural input position, whatever
/// holds them: `data` (any dtype), a row source, or stored codes (decoded).
std::vector<float> matrix_rows_as_f32(const host_tensor& part, std::int64_t begin, std::int64_t count);

/// The same rows with their columns in input order `order` (column j holds
/// input order[j]; empty: the natural order, else one entry per column), as
/// a linear whose inputs are permuted (GPTQ act-order,
/// stored_code_source::input_permutation) holds them.
std::vector<float> matrix_rows_in_order(const host_tensor& part, std::int64_t begin, std::int64_t count,
                                        std::span<const std::int32_t> order);

/// Whether two input orders are the same (empty and 0, 1, 2, ... both the natural one).
bool same_input_order(std::span<const std::int32_t> a, std::span<const std::int32_t> b);

/// The input order of a linear stacked from `parts` and prepared in
/// `format`: that of its first part kept as codes in that format (GPTQ
/// act-order), whose codes are then packed as they are; empty for the
/// natural order, or where no part's codes are kept as they are (all
/// decoded). Throws std::invalid_argument naming a part whose permutation is
/// not one of its inputs (a wrong length, an entry out of range or twice).
std::vector<std::int32_t> stacked_input_order(std::span<const host_tensor> parts, weight_quantization format);

class backend;

/// Memory owned by a backend; returned to it when destroyed. Move-only.
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(backend* owner, void* data, std::size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}
  device_buffer(device_buffer&& other) noexcept { *this = std::move(other); }
  device_buffer& operator=(device_buffer&& other) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { release(); }

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  /// Views the buffer as a packed rows × cols matrix of `type`.
  tensor_view view(dtype type, std::int64_t rows, std::int64_t cols) const {
    return make_view(data_, type, rows, cols);
  }

 private:
  void release();

  backend* owner_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace troupe
