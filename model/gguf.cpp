#include "model/gguf.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace troupe {

namespace {

constexpr std::uint32_t gguf_magic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr std::uint64_t default_alignment = 32;
constexpr std::uint32_t max_dims = 4;
// Elements per tensor above which byte sizes could overflow 64 bits.
constexpr std::uint64_t max_elements = std::uint64_t{1} << 60;

struct type_info {
  ggml_type type;
  std::string_view name;
  std::uint64_t block_elements;
  std::uint64_t block_bytes;
  int code_bits;  ///< bits a weight needs on a linear grid to hold its stored value; 0 for plain floats
};

constexpr type_info supported_types[] = {
    {ggml_type::f32, "F32", 1, 4, 0},
    {ggml_type::f16, "F16", 1, 2, 0},
    {ggml_type::bf16, "BF16", 1, 2, 0},
    {ggml_type::q8_0, "Q8_0", 32, 34, 8},
    {ggml_type::q4_0, "Q4_0", 32, 18, 4},
    {ggml_type::q4_1, "Q4_1", 32, 20, 4},
    {ggml_type::q5_0, "Q5_0", 32, 22, 5},
    {ggml_type::q5_1, "Q5_1", 32, 24, 5},
    // Q3_K's values are d·k·q, k·q in -128..124: 8 bits on a linear grid. Q2_K's
    // d·s·q - dmin·m (s·q in 0..45) shift by a minimum per 16: no small grid
    // holds a group of 32 of either, and int8 per row comes closest. (A kept
    // Q3_K matrix needs no such grid: int4_g16 has its scales per 16.)
    {ggml_type::q2_k, "Q2_K", 256, 84, 8},
    {ggml_type::q3_k, "Q3_K", 256, 110, 8},
    {ggml_type::q4_k, "Q4_K", 256, 144, 4},
    {ggml_type::q5_k, "Q5_K", 256, 176, 5},
    {ggml_type::q6_k, "Q6_K", 256, 210, 6},
    // IQ4's 16 levels are int8 values on a non-linear grid: 8 bits on a linear one.
    {ggml_type::iq4_nl, "IQ4_NL", 32, 18, 8},
    {ggml_type::iq4_xs, "IQ4_XS", 256, 136, 8},
};

// "F32, F16, ..." for errors naming what troupe reads.
std::string supported_type_names() {
  std::string out;
  for (const type_info& info : supported_types) out += (out.empty() ? "" : ", ") + std::string(info.name);
  return out;
}

// ggml types troupe recognises but cannot convert, by number: named in errors.
constexpr std::pair<std::uint32_t, std::string_view> unsupported_types[] = {
    {9, "Q8_1"},   {15, "Q8_K"},  {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"},
    {21, "IQ3_S"}, {22, "IQ2_S"}, {24, "I8"},      {25, "I16"},    {26, "I32"},     {27, "I64"},
    {28, "F64"},   {29, "IQ1_M"}, {34, "TQ1_0"},   {35, "TQ2_0"},  {39, "MXFP4"},
};

const type_info* find_type(std::uint32_t id) {
  for (const type_info& info : supported_types)
    if (static_cast<std::uint32_t>(info.type) == id) return &info;
  return nullptr;
}

const type_info& info_of(ggml_type type) {
  const type_info* info = find_type(static_cast<std::uint32_t>(type));
  if (info == nullptr) throw std::logic_error("ggml type outside the supported table");
  return *info;
}

bool valid_type(std::uint32_t raw) { return raw <= static_cast<std::uint32_t>(gguf_type::float64); }

// A bounds-checked reading position in the mapping; `where` names what is
// being read for error messages.
class reader {
 public:
  reader(const std::string& file, std::span<const std::byte> bytes) : file_(file), bytes_(bytes) {}

  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    throw std::runtime_error(file_ + ": " + where + ": " + message);
  }
  std::uint64_t position() const { return position_; }
  std::uint64_t remaining() const { return bytes_.size() - position_; }

  std::span<const std::byte> take(std::uint64_t count, const std::string& where) {
    if (count > remaining()) {
      fail(where, "needs " + std::to_string(count) + " bytes at offset " + std::to_string(position_) +
                      " but the file ends after " + std::to_string(bytes_.size()) + " bytes (truncated)");
    }
    const auto out = bytes_.subspan(position_, count);
    position_ += count;
    return out;
  }
  template <class T>
  T read(const std::string& where) {
    T value;
    std::memcpy(&value, take(sizeof(T), where).data(), sizeof(T));
    return value;
  }
  std::string_view read_string(const std::string& where) {
    const auto length = read<std::uint64_t>(where);
    if (length > remaining()) {
      fail(where, "string length " + std::to_string(length) + " runs past the end of the file (" +
                      std::to_string(remaining()) + " bytes left)");
    }
    const auto text = take(length, where);
    return {reinterpret_cast<const char*>(text.data()), text.size()};
  }

 private:
  std::string file_;
  std::span<const std::byte> bytes_;
  std::uint64_t position_ = 0;
};

void read_scalar(reader& in, gguf_value& value, const std::string& where) {
  switch (value.type) {
    case gguf_type::uint8:
      value.unsigned_value = in.read<std::uint8_t>(where);
      break;
    case gguf_type::boolean: {
      const auto raw = in.read<std::uint8_t>(where);
      if (raw > 1) in.fail(where, "boolean byte " + std::to_string(raw) + " is neither 0 nor 1");
      value.unsigned_value = raw;
      break;
    }
    case gguf_type::uint16:
      value.unsigned_value = in.read<std::uint16_t>(where);
      break;
    case gguf_type::uint32:
      value.unsigned_value = in.read<std::uint32_t>(where);
      break;
    case gguf_type::uint64:
      value.unsigned_value = in.read<std::uint64_t>(where);
      break;
    case gguf_type::int8:
      value.signed_value = in.read<std::int8_t>(where);
      break;
    case gguf_type::int16:
      value.signed_value = in.read<std::int16_t>(where);
      break;
    case gguf_type::int32:
      value.signed_value = in.read<std::int32_t>(where);
      break;
    case gguf_type::int64:
      value.signed_value = in.read<std::int64_t>(where);
      break;
    case gguf_type::float32:
      value.float_value = in.read<float>(where);
      break;
    case gguf_type::float64:
      value.float_value = in.read<double>(where);
      break;
    case gguf_type::string:
      value.text = in.read_string(where);
      break;
    case gguf_type::array:
      break;
  }
}

void read_array(reader& in, gguf_value& value, const std::string& where) {
  const auto element = in.read<std::uint32_t>(where);
  if (!valid_type(element)) in.fail(where, "unknown array element type " + std::to_string(element));
  value.element_type = static_cast<gguf_type>(element);
  if (value.element_type == gguf_type::array) in.fail(where, "arrays of arrays are not supported");
  value.count = in.read<std::uint64_t>(where);
  if (value.element_type == gguf_type::string) {
    // Each string takes at least its 8-byte length.
    if (value.count > in.remaining() / 8) {
      in.fail(where, "array of " + std::to_string(value.count) + " strings cannot fit in the " +
                         std::to_string(in.remaining()) + " bytes left");
    }
    value.strings.reserve(value.count);
    for (std::uint64_t i = 0; i < value.count; ++i)
      value.strings.push_back(in.read_string(where + "[" + std::to_string(i) + "]"));
    return;
  }
  const std::uint64_t size = gguf_scalar_bytes(value.element_type);
  if (value.count > in.remaining() / size) {
    in.fail(where, "array of " + std::to_string(value.count) + " " + std::string(gguf_type_name(value.element_type)) +
                       " runs past the end of the file");
  }
  value.elements = in.take(value.count * size, where);
}

std::string dims_text(const std::vector<std::uint64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// One metadata entry: its key and value.
std::pair<std::string, gguf_value> read_entry(reader& in, std::uint64_t index) {
  std::string key(in.read_string("metadata entry " + std::to_string(index)));
  const std::string where = "metadata key '" + key + "'";
  const auto raw_type = in.read<std::uint32_t>(where);
  if (!valid_type(raw_type)) in.fail(where, "unknown value type " + std::to_string(raw_type));
  gguf_value value;
  value.type = static_cast<gguf_type>(raw_type);
  if (value.type == gguf_type::array) {
    read_array(in, value, where);
  } else {
    read_scalar(in, value, where);
  }
  return {std::move(key), std::move(value)};
}

const type_info& tensor_type(reader& in, const std::string& where) {
  const auto raw_type = in.read<std::uint32_t>(where);
  if (const type_info* info = find_type(raw_type)) return *info;
  for (const auto& [id, name] : unsupported_types)
    if (id == raw_type)
      in.fail(where, "unsupported type " + std::string(name) + " (supported: " + supported_type_names() + ")");
  in.fail(where, "unknown type " + std::to_string(raw_type));
}

// One tensor info, its shape, block and alignment checked; data not yet placed.
gguf_tensor read_tensor_info(reader& in, std::uint64_t index, std::uint64_t alignment) {
  gguf_tensor tensor;
  tensor.name = std::string(in.read_string("tensor info " + std::to_string(index)));
  const std::string where = "tensor '" + tensor.name + "'";
  const auto n_dims = in.read<std::uint32_t>(where);
  if (n_dims > max_dims) in.fail(where, std::to_string(n_dims) + " dimensions (at most 4)");
  for (std::uint32_t d = 0; d < n_dims; ++d) tensor.dims.push_back(in.read<std::uint64_t>(where));
  const type_info& info = tensor_type(in, where);
  tensor.type = info.type;
  tensor.offset = in.read<std::uint64_t>(where);
  std::uint64_t elements = 1;
  for (std::uint64_t extent : tensor.dims) {
    if (extent > max_elements || (extent != 0 && elements > max_elements / extent))
      in.fail(where, "shape " + dims_text(tensor.dims) + " has too many elements (overflow)");
    elements *= extent;
  }
  const std::uint64_t row = tensor.dims.empty() ? 1 : tensor.dims[0];
  if (row % info.block_elements != 0) {
    in.fail(where, "row length " + std::to_string(row) + " is not a multiple of the " + std::string(info.name) +
                       " block of " + std::to_string(info.block_elements));
  }
  tensor.bytes = elements / info.block_elements * info.block_bytes;
  if (tensor.offset % alignment != 0) {
    in.fail(where, "offset " + std::to_string(tensor.offset) + " is not a multiple of the alignment " +
                       std::to_string(alignment));
  }
  return tensor;
}

// Points every tensor into the data section after checking it lies inside
// the file and shares no byte with another.
void place_tensors(const reader& in, std::vector<gguf_tensor>& tensors, std::span<const std::byte> file,
                   std::uint64_t data_start) {
  const std::uint64_t data_size = data_start > file.size() ? 0 : file.size() - data_start;
  std::vector<const gguf_tensor*> by_offset;
  for (gguf_tensor& tensor : tensors) {
    if (tensor.offset > data_size || tensor.bytes > data_size - tensor.offset) {
      in.fail("tensor '" + tensor.name + "'", "data " + range_text(tensor.offset, tensor.offset + tensor.bytes) +
                                                  " runs past the end of the file (" + std::to_string(data_size) +
                                                  " bytes of tensor data)");
    }
    tensor.data = file.data() + data_start + tensor.offset;
    if (tensor.bytes > 0) by_offset.push_back(&tensor);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const gguf_tensor* a, const gguf_tensor* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const gguf_tensor& previous = *by_offset[i - 1];
    const gguf_tensor& current = *by_offset[i];
    if (current.offset < previous.offset + previous.bytes) {
      in.fail("tensors", "'" + previous.name + "' " + range_text(previous.offset, previous.offset + previous.bytes) +
                             " and '" + current.name + "' " +
                             range_text(current.offset, current.offset + current.bytes) + " overlap");
    }
  }
}

}  // namespace

std::string_view ggml_type_name(ggml_type type) { return info_of(type).name; }
std::uint64_t ggml_block_elements(ggml_type type) { return info_of(type).block_elements; }
std::uint64_t ggml_block_bytes(ggml_type type) { return info_of(type).block_bytes; }
int ggml_code_bits(ggml_type type) { return info_of(type).code_bits; }

std::uint64_t gguf_tensor::elements() const {
  std::uint64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

gguf_file::gguf_file(const std::filesystem::path& path)
    : path_(path), display_name_(path.filename().string()), file_(path) {
  parse();
}

const gguf_value* gguf_file::find(std::string_view key) const {
  auto found = metadata_.find(key);
  return found == metadata_.end() ? nullptr : &found->second;
}

const gguf_tensor* gguf_file::find_tensor(std::string_view name) const {
  auto found = by_name_.find(name);
  return found == by_name_.end() ? nullptr : &tensors_[found->second];
}

void gguf_file::fail_key(std::string_view key, const std::string& message) const {
  throw std::runtime_error(display_name_ + ": metadata key '" + std::string(key) + "': " + message);
}

void gguf_file::parse() {
  reader in(display_name_, file_.bytes());
  const auto magic = in.read<std::uint32_t>("header");
  if (magic != gguf_magic) in.fail("header", "bad magic (not a GGUF file)");
  version_ = in.read<std::uint32_t>("header");
  if (version_ != 2 && version_ != 3)
    in.fail("header", "unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  const auto tensor_count = in.read<std::uint64_t>("header");
  const auto metadata_count = in.read<std::uint64_t>("header");
  // A metadata entry takes at least 12 bytes (key length, type), a tensor info at least 24.
  if (metadata_count > in.remaining() / 12)
    in.fail("header", "metadata count " + std::to_string(metadata_count) + " cannot fit in the file");
  if (tensor_count > in.remaining() / 24)
    in.fail("header", "tensor count " + std::to_string(tensor_count) + " cannot fit in the file");
  for (std::uint64_t i = 0; i < metadata_count; ++i) {
    auto [key, value] = read_entry(in, i);
    if (!metadata_.emplace(key, std::move(value)).second) in.fail("metadata key '" + key + "'", "appears twice");
  }
  if (const gguf_value* alignment = find("general.alignment")) {
    if (alignment->type != gguf_type::uint32) fail_key("general.alignment", "must be a uint32");
    const std::uint64_t a = alignment->unsigned_value;
    if (a == 0 || (a & (a - 1)) != 0) fail_key("general.alignment", std::to_string(a) + " is not a power of two");
    alignment_ = a;
  }
  tensors_.reserve(tensor_count);
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    gguf_tensor tensor = read_tensor_info(in, i, alignment_);
    if (!by_name_.emplace(tensor.name, tensors_.size()).second)
      in.fail("tensor '" + tensor.name + "'", "appears twice");
    tensors_.push_back(std::move(tensor));
  }
  const std::uint64_t data_start = (in.position() + alignment_ - 1) / alignment_ * alignment_;
  place_tensors(in, tensors_, file_.bytes(), data_start);
}

bool is_gguf_path(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  if (path.extension() == ".gguf") return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace troupe
