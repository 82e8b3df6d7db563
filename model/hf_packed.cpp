#include "model/hf_packed.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace troupe::hf_packed {

namespace {

// AWQ's word holds output 8c + j in nibble awq_nibble[j].
constexpr int awq_nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

codes::codes(const hf_int4_config& quant, parts parts)
    : awq_(quant.method == "awq"),
      bits_(quant.bits),
      per_word_(32 / quant.bits),
      mask_((1u << quant.bits) - 1),
      zero_bias_(quant.zero_bias),
      parts_(std::move(parts)) {}

int codes::zero(std::int64_t g, std::int64_t n) const {
  const std::int32_t word = parts_.qzeros->data[g * (parts_.out / per_word_) + n / per_word_];
  const int field = awq_ ? awq_nibble[n % 8] : static_cast<int>(n % per_word_);
  // GPTQ v1 stores zero − 1 in `bits` bits, so a zero of 0 is stored as 2^bits − 1.
  return static_cast<int>(((static_cast<std::uint32_t>(word) >> (bits_ * field)) + zero_bias_) & mask_);
}

void codes::input_codes(std::int64_t k, std::int64_t first, std::int64_t count, std::uint8_t* out,
                        std::int64_t stride) const {
  const std::int64_t n_out = parts_.out;
  if (awq_) {
    const std::int32_t* row = parts_.qweight->data + k * (n_out / 8);
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t n = first + i;
      const auto word = static_cast<std::uint32_t>(row[n / 8]);
      out[i * stride] = static_cast<std::uint8_t>((word >> (4 * awq_nibble[n % 8])) & mask_);
    }
    return;
  }
  const std::int32_t* row = parts_.qweight->data + (k / per_word_) * n_out + first;
  const int shift = bits_ * static_cast<int>(k % per_word_);
  for (std::int64_t i = 0; i < count; ++i)
    out[i * stride] = static_cast<std::uint8_t>((static_cast<std::uint32_t>(row[i]) >> shift) & mask_);
}

const int32_tensor* reader::find_int32(const std::string& name, std::string& file) const {
  for (const safetensors_file& f : files_) {
    if (const int32_tensor* tensor = f.find_int32(name)) {
      file = f.display_name();
      return tensor;
    }
  }
  return nullptr;
}

parts reader::read(const std::string& prefix, const int32_tensor* qweight, std::int64_t out, std::int64_t in) const {
  file_ = std::string();
  find_int32(prefix + ".qweight", file_);
  parts parts;
  parts.qweight = qweight;
  parts.out = out;
  parts.in = in;
  const std::int64_t group = quant_.group_size < 0 ? in : quant_.group_size;
  if (in % group != 0)
    fail(prefix + ".qweight", "quantization_config.group_size " + std::to_string(quant_.group_size) +
                                  " does not divide its " + std::to_string(in) + " input features");
  // 4-bit layers are regrouped in 32s; 8-bit ones only need whole words.
  const std::int64_t per_word = 32 / quant_.bits, in_multiple = quant_.bits == 4 ? 32 : per_word;
  if (out % per_word != 0 || in % in_multiple != 0)
    fail(prefix + ".qweight", "[" + std::to_string(out) + ", " + std::to_string(in) +
                                  "] needs outputs in multiples of " + std::to_string(per_word) +
                                  " and inputs in multiples of " + std::to_string(in_multiple));
  parts.groups = in / group;
  const bool awq = quant_.method == "awq";
  expect_shape(prefix + ".qweight", qweight->shape,
               awq ? std::vector<std::int64_t>{in, out / 8} : std::vector<std::int64_t>{in / per_word, out});
  std::string ignored;
  parts.qzeros = find_int32(prefix + ".qzeros", ignored);
  if (parts.qzeros == nullptr) fail(prefix + ".qzeros", "is missing (quant_method " + quant_.method + ")");
  expect_shape(prefix + ".qzeros", parts.qzeros->shape, {parts.groups, out / per_word});
  const auto scales = tensors_.find(prefix + ".scales");
  if (scales == tensors_.end()) fail(prefix + ".scales", "is missing (quant_method " + quant_.method + ")");
  if (scales->second->type != dtype::f16)
    fail(prefix + ".scales", "must be F16, got " + std::string(dtype_name(scales->second->type)));
  expect_shape(prefix + ".scales", scales->second->shape, {parts.groups, out});
  parts.scales = static_cast<const std::uint16_t*>(scales->second->data);
  read_groups(prefix, group, parts);
  return parts;
}

void reader::check_zeros(const std::string& prefix, const codes& decoded) const {
  if (!quant_.symmetric) return;
  const int expected = 1 << (quant_.bits - 1);
  const parts& parts = decoded.layout();
  for (std::int64_t g = 0; g < parts.groups; ++g) {
    for (std::int64_t n = 0; n < parts.out; ++n) {
      if (const int zero = decoded.zero(g, n); zero != expected)
        fail(prefix + ".qzeros", "group " + std::to_string(g) + " of output " + std::to_string(n) + " has zero " +
                                     std::to_string(zero) + " where quantization_config.sym is true (" +
                                     std::to_string(expected) + ")");
    }
  }
}

void reader::fail(const std::string& tensor, const std::string& message) const {
  throw std::runtime_error(file_ + ": tensor '" + tensor + "': " + message);
}

void reader::expect_shape(const std::string& tensor, const std::vector<std::int64_t>& shape,
                          const std::vector<std::int64_t>& expected) const {
  if (shape != expected)
    fail(tensor, "has shape " + shape_text(shape) + ", expected " + shape_text(expected) + " (" + quant_.method +
                     ", group_size " + std::to_string(quant_.group_size) + ")");
}

// The group of every input: from g_idx when there is one, else k / group.
// GPTQ act-order (desc_act) assigns groups to inputs in the order of the
// Hessian's diagonal, so a group's members are scattered; sorted by group
// they lie together again, which needs each group to have exactly `group`
// members (as AutoGPTQ writes them).
void reader::read_groups(const std::string& prefix, std::int64_t group, parts& parts) const {
  parts.group_of.resize(static_cast<std::size_t>(parts.in));
  for (std::int64_t k = 0; k < parts.in; ++k)
    parts.group_of[static_cast<std::size_t>(k)] = static_cast<std::int32_t>(k / group);
  std::string ignored;
  const int32_tensor* g_idx = find_int32(prefix + ".g_idx", ignored);
  if (g_idx == nullptr && quant_.act_order)
    fail(prefix + ".g_idx", "is missing where quantization_config.desc_act is true");
  if (g_idx == nullptr) return;
  expect_shape(prefix + ".g_idx", g_idx->shape, {parts.in});
  std::vector<std::int64_t> members(static_cast<std::size_t>(parts.groups));
  for (std::int64_t k = 0; k < parts.in; ++k) {
    const std::int32_t g = g_idx->data[k];
    if (g < 0 || g >= parts.groups)
      fail(prefix + ".g_idx", "entry " + std::to_string(k) + " is " + std::to_string(g) + ", not a group below " +
                                  std::to_string(parts.groups));
    parts.group_of[static_cast<std::size_t>(k)] = g;
    ++members[static_cast<std::size_t>(g)];
  }
  for (std::int64_t g = 0; g < parts.groups; ++g) {
    if (members[static_cast<std::size_t>(g)] != group)
      fail(prefix + ".g_idx", "group " + std::to_string(g) + " has " +
                                  std::to_string(members[static_cast<std::size_t>(g)]) + " inputs, not " +
                                  std::to_string(group) + " (quantization_config.group_size)");
  }
  parts.permutation.resize(static_cast<std::size_t>(parts.in));
  std::iota(parts.permutation.begin(), parts.permutation.end(), 0);
  std::stable_sort(parts.permutation.begin(), parts.permutation.end(), [&](std::int32_t a, std::int32_t b) {
    return parts.group_of[static_cast<std::size_t>(a)] < parts.group_of[static_cast<std::size_t>(b)];
  });
  if (std::is_sorted(parts.permutation.begin(), parts.permutation.end())) parts.permutation.clear();
}

}  // namespace troupe::hf_packed
