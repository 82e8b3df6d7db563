#pragma once
// Memory-mapped reader of llama.cpp's GGUF format (versions 2 and 3): the
// magic "GGUF", a uint32 version, uint64 tensor and metadata counts, typed
// metadata key/values (scalars, strings, arrays), tensor infos (name, dims
// innermost first, ggml type, offset), then the tensor data, which starts at
// the end of the infos rounded up to `general.alignment` (default 32).
// Every count, length, offset and size is bounds-checked before use; errors
// name the file and the key or tensor, as the safetensors reader does.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/mapped_file.hpp"

namespace troupe {

/// Metadata value types, numbered as in the file.
enum class gguf_type : std::uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};

/// The name of a metadata type ("uint32", "string", ...).
std::string_view gguf_type_name(gguf_type type);
/// Bytes of one value of a fixed-size metadata type; 0 for string and array.
std::uint64_t gguf_scalar_bytes(gguf_type type);

/// Tensor element formats troupe reads, numbered as ggml numbers them.
/// Other ggml types are refused at open with their name.
enum class ggml_type : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  iq4_nl = 20,
  iq4_xs = 23,
  bf16 = 30
};

/// "F32", "Q4_K", ...
std::string_view ggml_type_name(ggml_type type);
/// Elements per block (1 for plain floats, 32 or 256 for quantised types).
std::uint64_t ggml_block_elements(ggml_type type);
/// Bytes per block.
std::uint64_t ggml_block_bytes(ggml_type type);
/// Bits a weight of a quantised type needs on a linear grid to hold its
/// stored value exactly (Q8_0 8, Q6_K 6, Q5_* 5, Q4_* 4, IQ4_NL / IQ4_XS 8:
/// their 16 levels are int8 values; Q3_K 8: d·k·q with k·q in -128..124;
/// Q2_K 8: its minimums per 16 weights fit no smaller grid); 0 for plain floats.
int ggml_code_bits(ggml_type type);

/// One metadata value. Scalars are held widened; strings and string arrays
/// are views into the mapping; numeric arrays keep their raw little-endian
/// elements.
struct gguf_value {
  gguf_type type = gguf_type::uint8;
  gguf_type element_type = gguf_type::uint8;  ///< arrays only
  std::uint64_t count = 0;                    ///< arrays only: number of elements
  std::uint64_t unsigned_value = 0;           ///< uint8..uint64 and boolean
  std::int64_t signed_value = 0;              ///< int8..int64
  double float_value = 0.0;                   ///< float32, float64
  std::string_view text;                      ///< string
  std::vector<std::string_view> strings;      ///< array of string
  std::span<const std::byte> elements;        ///< array of numbers or booleans

  /// True for the integer types (not boolean).
  bool is_integer() const;
  /// The numeric array's element `i` as a double (any numeric element type).
  double number_at(std::uint64_t i) const;
};

/// One tensor as described in the file; `data` points into the mapping.
struct gguf_tensor {
  std::string name;
  ggml_type type = ggml_type::f32;
  std::vector<std::uint64_t> dims;  ///< ggml order: dims[0] is the innermost (row length)
  std::uint64_t offset = 0;         ///< relative to the start of the data section
  std::uint64_t bytes = 0;
  const std::byte* data = nullptr;

  /// Product of dims.
  std::uint64_t elements() const;
};

/// One open, validated .gguf file. Move-only; moving keeps every view valid.
class gguf_file {
 public:
  /// Maps `path` and validates the header, every metadata entry and every
  /// tensor info. Throws std::runtime_error starting with the file name and
  /// naming the key or tensor, e.g. "m.gguf: tensor 'blk.0.attn_q.weight':
  /// offset 96 is not a multiple of the alignment 32".
  explicit gguf_file(const std::filesystem::path& path);
  gguf_file(gguf_file&&) noexcept = default;
  gguf_file& operator=(gguf_file&&) noexcept = default;

  const std::filesystem::path& path() const { return path_; }
  /// The file name used in error messages.
  const std::string& display_name() const { return display_name_; }
  std::uint32_t version() const { return version_; }
  /// `general.alignment`, or 32.
  std::uint64_t alignment() const { return alignment_; }
  /// Every metadata entry by key.
  const std::map<std::string, gguf_value, std::less<>>& metadata() const { return metadata_; }
  /// The value of `key`, or nullptr.
  const gguf_value* find(std::string_view key) const;
  /// Every tensor, in file order.
  const std::vector<gguf_tensor>& tensors() const { return tensors_; }
  /// The tensor called `name`, or nullptr.
  const gguf_tensor* find_tensor(std::string_view name) const;
  /// Throws "<file>: metadata key '<key>': <message>".
  [[noreturn]] void fail_key(std::string_view key, const std::string& message) const;

 private:
  void parse();

  std::filesystem::path path_;
  std::string display_name_;
  mapped_file file_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::map<std::string, gguf_value, std::less<>> metadata_;
  std::vector<gguf_tensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> by_name_;
};

/// True when `path` is a regular file that ends in ".gguf" or starts with
/// the GGUF magic.
bool is_gguf_path(const std::filesystem::path& path);

}  // namespace troupe
