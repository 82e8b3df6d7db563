#include "model/safetensors.hpp"

#include <algorithm>
#include <array>
#include <boost/json/parse.hpp>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "base/json_field.hpp"

namespace troupe {

namespace {

// Tags the format defines that we cannot compute in: recognised so the error
// says "unsupported" rather than "unknown".
constexpr std::array<std::string_view, 16> unsupported_dtypes = {
    "BOOL", "U8",      "I8",      "I16",     "U16", "U32",     "I64",     "U64",
    "F64",  "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};

// Elements per tensor above which sizes could overflow 64-bit byte counts.
constexpr std::uint64_t max_elements = std::uint64_t{1} << 60;

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// One tensor entry as read from the header, before it becomes a view.
struct raw_entry {
  std::string name;
  dtype type = dtype::f32;
  bool int32 = false;  ///< I32 (packed quantised codes); `type` is then f32, of the same size
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

class header_parser {
 public:
  header_parser(const std::string& file, std::uint64_t data_size) : file_(file), data_size_(data_size) {}

  [[noreturn]] void fail(const std::string& message) const { throw std::runtime_error(file_ + ": " + message); }
  [[noreturn]] void fail_tensor(std::string_view name, const std::string& message) const {
    fail("tensor '" + std::string(name) + "': " + message);
  }

  // The element type; I32 sets `int32` instead.
  dtype parse_dtype_tag(std::string_view name, const boost::json::value* tag, bool& int32) const {
    if (tag == nullptr) fail_tensor(name, "missing 'dtype'");
    if (!tag->is_string()) fail_tensor(name, "'dtype' must be a string, got " + std::string(json_type_name(*tag)));
    const std::string_view text = tag->get_string();
    int32 = text == "I32";
    if (int32 || text == "F32") return dtype::f32;
    if (text == "F16") return dtype::f16;
    if (text == "BF16") return dtype::bf16;
    if (std::find(unsupported_dtypes.begin(), unsupported_dtypes.end(), text) != unsupported_dtypes.end()) {
      fail_tensor(name, "unsupported dtype " + std::string(text) + " (supported: BF16, F16, F32)");
    }
    fail_tensor(name, "unknown dtype '" + std::string(text) + "'");
  }

  std::vector<std::int64_t> parse_shape(std::string_view name, const boost::json::value* value) const {
    if (value == nullptr) fail_tensor(name, "missing 'shape'");
    const boost::json::array* dims = value->if_array();
    if (dims == nullptr)
      fail_tensor(name, "'shape' must be a list of integers, got " + std::string(json_type_name(*value)));
    std::vector<std::int64_t> shape;
    std::uint64_t elements = 1;
    for (const boost::json::value& dim : *dims) {
      if (dim.is_int64() && dim.get_int64() < 0) {
        fail_tensor(name, "shape has a negative dimension " + std::to_string(dim.get_int64()));
      }
      if (!dim.is_int64() && !dim.is_uint64()) {
        fail_tensor(name, "'shape' must be a list of integers, found " + std::string(json_type_name(dim)));
      }
      const std::uint64_t extent = dim.is_int64() ? static_cast<std::uint64_t>(dim.get_int64()) : dim.get_uint64();
      if (extent > max_elements || (extent != 0 && elements > max_elements / extent)) {
        fail_tensor(name, "shape has too many elements (overflow)");
      }
      elements *= extent;
      shape.push_back(static_cast<std::int64_t>(extent));
    }
    return shape;
  }

  std::pair<std::uint64_t, std::uint64_t> parse_offsets(std::string_view name, const boost::json::value* value) const {
    if (value == nullptr) fail_tensor(name, "missing 'data_offsets'");
    const boost::json::array* pair = value->if_array();
    const auto is_offset = [](const boost::json::value& v) {
      return v.is_uint64() || (v.is_int64() && v.get_int64() >= 0);
    };
    if (pair == nullptr || pair->size() != 2 || !is_offset((*pair)[0]) || !is_offset((*pair)[1])) {
      fail_tensor(name, "'data_offsets' must be two non-negative integers [begin, end)");
    }
    const auto as_u64 = [](const boost::json::value& v) {
      return v.is_uint64() ? v.get_uint64() : static_cast<std::uint64_t>(v.get_int64());
    };
    const std::uint64_t begin = as_u64((*pair)[0]);
    const std::uint64_t end = as_u64((*pair)[1]);
    if (begin > end) fail_tensor(name, "data_offsets " + range_text(begin, end) + " begin after they end");
    if (end > data_size_) {
      fail_tensor(name, "data_offsets " + range_text(begin, end) + " run past the end of the data (" +
                            std::to_string(data_size_) + " bytes after the header)");
    }
    return {begin, end};
  }

  raw_entry parse_entry(std::string_view name, const boost::json::value& value) const {
    const boost::json::object* fields = value.if_object();
    if (fields == nullptr) fail_tensor(name, "entry must be an object, got " + std::string(json_type_name(value)));
    raw_entry entry;
    entry.name = std::string(name);
    entry.type = parse_dtype_tag(name, fields->if_contains("dtype"), entry.int32);
    entry.shape = parse_shape(name, fields->if_contains("shape"));
    std::tie(entry.begin, entry.end) = parse_offsets(name, fields->if_contains("data_offsets"));
    std::uint64_t elements = 1;
    for (auto dim : entry.shape) elements *= static_cast<std::uint64_t>(dim);
    const std::uint64_t expected = elements * dtype_size(entry.type);
    if (entry.end - entry.begin != expected) {
      fail_tensor(name, "data_offsets " + range_text(entry.begin, entry.end) + " do not match shape " +
                            shape_text(entry.shape) + " × " +
                            std::string(entry.int32 ? "I32" : safetensors_dtype_name(entry.type)) + " (" +
                            std::to_string(expected) + " bytes)");
    }
    return entry;
  }

  std::map<std::string, std::string, std::less<>> parse_metadata(const boost::json::value& value) const {
    const boost::json::object* fields = value.if_object();
    if (fields == nullptr) fail("'__metadata__' must be an object, got " + std::string(json_type_name(value)));
    std::map<std::string, std::string, std::less<>> metadata;
    for (const auto& [key, item] : *fields) {
      if (!item.is_string()) fail("'__metadata__' value of '" + std::string(key) + "' must be a string");
      metadata.emplace(std::string(key), std::string(item.get_string()));
    }
    return metadata;
  }

  // Entries sorted by offset must not share bytes (empty tensors share nothing).
  void check_overlaps(std::vector<raw_entry>& entries) const {
    std::sort(entries.begin(), entries.end(), [](const raw_entry& a, const raw_entry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    const raw_entry* previous = nullptr;
    for (const raw_entry& entry : entries) {
      if (entry.begin == entry.end) continue;
      if (previous != nullptr && entry.begin < previous->end) {
        fail("tensors '" + previous->name + "' " + range_text(previous->begin, previous->end) + " and '" + entry.name +
             "' " + range_text(entry.begin, entry.end) + " overlap");
      }
      previous = &entry;
    }
  }

 private:
  std::string file_;
  std::uint64_t data_size_;
};

}  // namespace

std::string_view safetensors_dtype_name(dtype type) {
  switch (type) {
    case dtype::f32:
      return "F32";
    case dtype::f16:
      return "F16";
    case dtype::bf16:
      return "BF16";
  }
  return "?";
}

safetensors_file::safetensors_file(const std::filesystem::path& path)
    : path_(path), display_name_(path.filename().string()), file_(path) {
  parse_header();
}

const host_tensor* safetensors_file::find(std::string_view name) const {
  auto found = by_name_.find(name);
  return found == by_name_.end() || found->second >= tensors_.size() ? nullptr : &tensors_[found->second];
}

const int32_tensor* safetensors_file::find_int32(std::string_view name) const {
  for (const int32_tensor& tensor : int32_tensors_)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

void safetensors_file::parse_header() {
  const std::span<const std::byte> bytes = file_.bytes();
  const auto fail = [this](const std::string& message) { throw std::runtime_error(display_name_ + ": " + message); };
  if (bytes.size() < 8) {
    fail("file is " + std::to_string(bytes.size()) + " bytes, too short to hold the 8-byte header length");
  }
  std::uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | std::to_integer<std::uint64_t>(bytes[i]);
  if (header_length > safetensors_max_header_bytes) {
    fail("header length " + std::to_string(header_length) + " exceeds the limit of " +
         std::to_string(safetensors_max_header_bytes) + " bytes");
  }
  if (header_length > bytes.size() - 8) {
    fail("header length " + std::to_string(header_length) + " runs past the end of the file (" +
         std::to_string(bytes.size()) + " bytes)");
  }
  const std::string_view header_text(reinterpret_cast<const char*>(bytes.data()) + 8, header_length);
  boost::json::error_code error;
  const boost::json::value header =
      boost::json::parse(boost::json::string_view(header_text.data(), header_text.size()), error);
  if (error) fail("header is not valid JSON: " + error.message());
  if (!header.is_object()) fail("header must be a JSON object, got " + std::string(json_type_name(header)));

  const std::size_t data_start = 8 + header_length;
  header_parser parser(display_name_, bytes.size() - data_start);
  std::vector<raw_entry> entries;
  for (const auto& [key, value] : header.get_object()) {
    if (key == "__metadata__") {
      metadata_ = parser.parse_metadata(value);
    } else {
      entries.push_back(parser.parse_entry(std::string_view(key.data(), key.size()), value));
    }
  }
  parser.check_overlaps(entries);

  tensors_.reserve(entries.size());
  for (raw_entry& entry : entries) {
    const std::byte* data = bytes.data() + data_start + entry.begin;
    if (reinterpret_cast<std::uintptr_t>(data) % dtype_size(entry.type) != 0) {
      // The format does not promise alignment; compute kernels need it.
      auto copy = std::make_unique<std::byte[]>(entry.end - entry.begin);
      std::memcpy(copy.get(), data, entry.end - entry.begin);
      data = copy.get();
      aligned_copies_.push_back(std::move(copy));
    }
    if (entry.int32) {
      if (!by_name_.emplace(entry.name, SIZE_MAX).second) fail("tensor '" + entry.name + "' appears twice");
      int32_tensors_.push_back(
          int32_tensor{std::move(entry.name), std::move(entry.shape), reinterpret_cast<const std::int32_t*>(data)});
      continue;
    }
    if (!by_name_.emplace(entry.name, tensors_.size()).second) fail("tensor '" + entry.name + "' appears twice");
    tensors_.push_back(host_tensor{std::move(entry.name), entry.type, std::move(entry.shape), data});
  }
}

}  // namespace troupe
