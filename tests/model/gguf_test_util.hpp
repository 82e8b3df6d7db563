#pragma once
// GGUF files built byte by byte for the reader's tests: metadata entries
// encoded by hand, tensor infos with any offsets, types and dims.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::testing {

/// Little-endian encoders of GGUF's primitive fields.
inline std::string u32_bytes(std::uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
inline std::string u64_bytes(std::uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
inline std::string gguf_string(std::string_view text) { return u64_bytes(text.size()) + std::string(text); }

/// One metadata entry: key, value type number and the encoded value.
struct gguf_kv {
  std::string key;
  std::uint32_t type = 0;
  std::string value;
};

inline gguf_kv kv_u32(std::string key, std::uint32_t v) { return {std::move(key), 4, u32_bytes(v)}; }
inline gguf_kv kv_f32(std::string key, float v) {
  return {std::move(key), 6, std::string(reinterpret_cast<const char*>(&v), 4)};
}
inline gguf_kv kv_bool(std::string key, bool v) { return {std::move(key), 7, std::string(1, v ? '\1' : '\0')}; }
inline gguf_kv kv_string(std::string key, std::string_view v) { return {std::move(key), 8, gguf_string(v)}; }
inline gguf_kv kv_strings(std::string key, const std::vector<std::string>& items) {
  std::string value = u32_bytes(8) + u64_bytes(items.size());
  for (const auto& item : items) value += gguf_string(item);
  return {std::move(key), 9, value};
}
inline gguf_kv kv_i32s(std::string key, const std::vector<std::int32_t>& items) {
  std::string value = u32_bytes(5) + u64_bytes(items.size());
  for (auto item : items) value += u32_bytes(static_cast<std::uint32_t>(item));
  return {std::move(key), 9, value};
}
inline gguf_kv kv_f32s(std::string key, const std::vector<float>& items) {
  std::string value = u32_bytes(6) + u64_bytes(items.size());
  for (float item : items) value += std::string(reinterpret_cast<const char*>(&item), 4);
  return {std::move(key), 9, value};
}

/// One tensor info as written (dims innermost first, ggml type number).
struct gguf_tensor_entry {
  std::string name;
  std::vector<std::uint64_t> dims;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
};

/// A whole file: header, metadata, tensor infos, padding to `alignment`, `data`.
inline std::string gguf_bytes(const std::vector<gguf_kv>& kvs, const std::vector<gguf_tensor_entry>& tensors,
                              std::string_view data, std::uint32_t version = 3, std::size_t alignment = 32) {
  std::string out = "GGUF" + u32_bytes(version) + u64_bytes(tensors.size()) + u64_bytes(kvs.size());
  for (const gguf_kv& kv : kvs) out += gguf_string(kv.key) + u32_bytes(kv.type) + kv.value;
  for (const gguf_tensor_entry& t : tensors) {
    out += gguf_string(t.name) + u32_bytes(static_cast<std::uint32_t>(t.dims.size()));
    for (auto d : t.dims) out += u64_bytes(d);
    out += u32_bytes(t.type) + u64_bytes(t.offset);
  }
  out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
  return out + std::string(data);
}

/// `count` f32 values as bytes.
inline std::string f32_bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

}  // namespace troupe::testing
