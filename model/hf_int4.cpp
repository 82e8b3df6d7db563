#include "model/hf_int4.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "model/checkpoint_json.hpp"

namespace troupe {

namespace {

// AWQ's word holds output 8c + j in nibble awq_nibble[j].
constexpr int awq_nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The parts of one quantised projection, found and shape-checked.
struct packed_parts {
  const int32_tensor* qweight = nullptr;
  const int32_tensor* qzeros = nullptr;
  const std::uint16_t* scales = nullptr;  // f16 [groups][out]
  std::vector<std::int32_t> block_group;  // checkpoint group of each 32 inputs
  std::int64_t out = 0, in = 0, groups = 0;
};

class packed_source final : public int4_source {
 public:
  packed_source(const hf_int4_config& quant, packed_parts parts)
      : awq_(quant.method == "awq"), quant_(quant), parts_(std::move(parts)) {}

  weight_quantization format() const override { return quant_.format(); }
  const packed_parts& parts() const { return parts_; }

  // The zero of (group g, output n) as the checkpoint means it.
  int zero(std::int64_t g, std::int64_t n) const {
    const std::int32_t word = parts_.qzeros->data[g * (parts_.out / 8) + n / 8];
    const int nibble = awq_ ? awq_nibble[n % 8] : static_cast<int>(n % 8);
    // GPTQ v1 stores zero − 1 in four bits, so a zero of 0 is stored as 15.
    return static_cast<int>(((static_cast<std::uint32_t>(word) >> (4 * nibble)) + quant_.zero_bias) & 0x0f);
  }

  void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                 std::uint16_t* offsets) const override {
    const std::int64_t out = parts_.out;
    const bool asymmetric = format() == weight_quantization::int4_asym;
    for (std::int64_t n = first; n < first + count; ++n) {
      for (std::size_t t = 0; t < parts_.block_group.size(); ++t) {
        const std::int64_t g = parts_.block_group[t];
        const std::uint16_t scale = parts_.scales[g * out + n];
        *scales++ = scale;
        if (asymmetric) *offsets++ = float_to_f16(-f16_to_float(scale) * static_cast<float>(zero(g, n)));
      }
    }
    if (awq_) {
      read_awq_codes(first, count, codes);
    } else {
      read_gptq_codes(first, count, codes);
    }
  }

 private:
  // Both layouts put the outputs of one input (AWQ) or of eight inputs
  // (GPTQ) side by side, so the codes are read input by input across all
  // the rows asked for: each step reads one contiguous stretch of qweight.
  // Reading a row at a time instead walks down a column: for AWQ out / 2
  // bytes per code, a new page per code when out is 8192.

  // AWQ qweight [in][out / 8]: input k of output n is in word (k, n / 8), nibble awq_nibble[n % 8].
  void read_awq_codes(std::int64_t first, std::int64_t count, std::uint8_t* codes) const {
    const std::int64_t in = parts_.in, words = parts_.out / 8;
    for (std::int64_t k = 0; k < in; ++k) {
      const std::int32_t* input = parts_.qweight->data + k * words;
      for (std::int64_t i = 0; i < count; ++i) {
        const std::int64_t n = first + i;
        const auto word = static_cast<std::uint32_t>(input[n / 8]);
        codes[i * in + k] = static_cast<std::uint8_t>((word >> (4 * awq_nibble[n % 8])) & 0x0f);
      }
    }
  }

  // GPTQ qweight [in / 8][out]: word (w, n) holds inputs 8w..8w + 7 of output n, input 8w + j in nibble j.
  void read_gptq_codes(std::int64_t first, std::int64_t count, std::uint8_t* codes) const {
    const std::int64_t in = parts_.in;
    for (std::int64_t w = 0; w < in / 8; ++w) {
      const std::int32_t* inputs = parts_.qweight->data + w * parts_.out + first;
      for (std::int64_t i = 0; i < count; ++i) {
        const auto word = static_cast<std::uint32_t>(inputs[i]);
        for (int j = 0; j < 8; ++j) codes[i * in + 8 * w + j] = static_cast<std::uint8_t>((word >> (4 * j)) & 0x0f);
      }
    }
  }

  bool awq_;
  hf_int4_config quant_;
  packed_parts parts_;
};

// Finds and checks the parts of projection `prefix` ([out, in]); errors name `file`.
class parts_reader {
 public:
  parts_reader(const hf_int4_config& quant, std::span<const safetensors_file> files, const hf_tensor_map& tensors)
      : quant_(quant), files_(files), tensors_(tensors) {}

  const int32_tensor* find_int32(const std::string& name, std::string& file) const {
    for (const safetensors_file& f : files_) {
      if (const int32_tensor* tensor = f.find_int32(name)) {
        file = f.display_name();
        return tensor;
      }
    }
    return nullptr;
  }

  packed_parts read(const std::string& prefix, const int32_tensor* qweight, std::int64_t out, std::int64_t in) const {
    file_ = std::string();
    find_int32(prefix + ".qweight", file_);
    packed_parts parts;
    parts.qweight = qweight;
    parts.out = out;
    parts.in = in;
    const std::int64_t group = quant_.group_size < 0 ? in : quant_.group_size;
    if (in % group != 0)
      fail(prefix + ".qweight", "quantization_config.group_size " + std::to_string(quant_.group_size) +
                                    " does not divide its " + std::to_string(in) + " input features");
    if (out % 8 != 0 || in % 32 != 0)
      fail(prefix + ".qweight", "[" + std::to_string(out) + ", " + std::to_string(in) +
                                    "] needs outputs in multiples of 8 and inputs in multiples of 32");
    parts.groups = in / group;
    const bool awq = quant_.method == "awq";
    expect_shape(prefix + ".qweight", qweight->shape,
                 awq ? std::vector<std::int64_t>{in, out / 8} : std::vector<std::int64_t>{in / 8, out});
    std::string ignored;
    parts.qzeros = find_int32(prefix + ".qzeros", ignored);
    if (parts.qzeros == nullptr) fail(prefix + ".qzeros", "is missing (quant_method " + quant_.method + ")");
    expect_shape(prefix + ".qzeros", parts.qzeros->shape, {parts.groups, out / 8});
    const auto scales = tensors_.find(prefix + ".scales");
    if (scales == tensors_.end()) fail(prefix + ".scales", "is missing (quant_method " + quant_.method + ")");
    if (scales->second->type != dtype::f16)
      fail(prefix + ".scales", "must be F16, got " + std::string(dtype_name(scales->second->type)));
    expect_shape(prefix + ".scales", scales->second->shape, {parts.groups, out});
    parts.scales = static_cast<const std::uint16_t*>(scales->second->data);
    parts.block_group = block_groups(prefix, group, parts);
    return parts;
  }

  // Symmetric GPTQ is loaded as int4: every zero of the projection read last must be 8.
  void check_zeros(const std::string& prefix, const packed_source& source) const;

 private:
  [[noreturn]] void fail(const std::string& tensor, const std::string& message) const {
    throw std::runtime_error(file_ + ": tensor '" + tensor + "': " + message);
  }

  void expect_shape(const std::string& tensor, const std::vector<std::int64_t>& shape,
                    const std::vector<std::int64_t>& expected) const {
    if (shape != expected)
      fail(tensor, "has shape " + shape_text(shape) + ", expected " + shape_text(expected) + " (" + quant_.method +
                       ", group_size " + std::to_string(quant_.group_size) + ")");
  }

  // The checkpoint group of every 32 inputs: from g_idx when there is one
  // (each aligned 32 inputs must share a group), else k / group.
  std::vector<std::int32_t> block_groups(const std::string& prefix, std::int64_t group,
                                         const packed_parts& parts) const {
    std::vector<std::int32_t> out(static_cast<std::size_t>(parts.in / 32));
    for (std::size_t t = 0; t < out.size(); ++t) out[t] = static_cast<std::int32_t>(32 * t / group);
    std::string ignored;
    const int32_tensor* g_idx = find_int32(prefix + ".g_idx", ignored);
    if (g_idx == nullptr && quant_.act_order)
      fail(prefix + ".g_idx", "is missing where quantization_config.desc_act is true");
    if (g_idx == nullptr) return out;
    expect_shape(prefix + ".g_idx", g_idx->shape, {parts.in});
    for (std::int64_t k = 0; k < parts.in; ++k) {
      const std::int32_t g = g_idx->data[k];
      if (g < 0 || g >= parts.groups)
        fail(prefix + ".g_idx", "entry " + std::to_string(k) + " is " + std::to_string(g) + ", not a group below " +
                                    std::to_string(parts.groups));
      if (g != g_idx->data[k - k % 32])
        fail(prefix + ".g_idx", "inputs " + std::to_string(k - k % 32) + ".." + std::to_string(k - k % 32 + 31) +
                                    " fall in different groups (act-order / desc_act permutation): not supported");
      out[static_cast<std::size_t>(k / 32)] = g;
    }
    return out;
  }

  const hf_int4_config& quant_;
  std::span<const safetensors_file> files_;
  const hf_tensor_map& tensors_;
  mutable std::string file_;  // the file holding the projection read last, for errors
};

void parts_reader::check_zeros(const std::string& prefix, const packed_source& source) const {
  if (!quant_.symmetric) return;
  const packed_parts& parts = source.parts();
  for (std::int64_t g = 0; g < parts.groups; ++g) {
    for (std::int64_t n = 0; n < parts.out; ++n) {
      if (const int zero = source.zero(g, n); zero != 8)
        fail(prefix + ".qzeros", "group " + std::to_string(g) + " of output " + std::to_string(n) + " has zero " +
                                     std::to_string(zero) + " where quantization_config.sym is true (8)");
    }
  }
}

}  // namespace

weight_quantization hf_int4_config::format() const {
  return symmetric ? weight_quantization::int4 : weight_quantization::int4_asym;
}

std::optional<hf_int4_config> parse_hf_int4_config(std::string_view config_json, std::string_view source) {
  const boost::json::value document = parse_json_text(config_json, source);
  const file_json_rules rules = checkpoint_json_rules(std::string(source));
  const json_field config(document, rules);
  config.object();
  const std::optional<json_field> quant = config.get_object("quantization_config");
  if (!quant) return std::nullopt;
  hf_int4_config out;
  out.method = quant->at("quant_method").string();
  if (out.method != "awq" && out.method != "gptq")
    quant->fail("quant_method", "'" + out.method + "' is not supported (supported: awq, gptq)");
  const bool awq = out.method == "awq";
  const std::int64_t bits = quant->has("bits") || !awq ? quant->at("bits").integer() : quant->at("w_bit").integer();
  if (bits != 4) quant->fail("bits", "(" + std::to_string(bits) + ") is not supported (supported: 4)");
  const char* group_key = awq && !quant->has("group_size") ? "q_group_size" : "group_size";
  out.group_size = quant->at(group_key).integer();
  if (out.group_size != -1 && (out.group_size < 32 || out.group_size % 32 != 0))
    quant->fail(group_key, "(" + std::to_string(out.group_size) + ") must be a multiple of 32 or -1");
  if (awq) {
    std::string version = quant->get_string("version").value_or("gemm");
    std::transform(version.begin(), version.end(), version.begin(), [](unsigned char c) { return std::tolower(c); });
    if (version != "gemm") quant->fail("version", "'" + version + "' is not supported (supported: gemm)");
    if (!quant->get_bool("zero_point").value_or(true))
      quant->fail("zero_point", "false is not supported (AWQ without zero points)");
    if (out.group_size == -1) quant->fail(group_key, "-1 is not supported for AWQ");
    return out;
  }
  out.symmetric = quant->get_bool("sym").value_or(true);
  const std::string format = quant->get_string("checkpoint_format").value_or("gptq");
  if (format != "gptq" && format != "gptq_v2")
    quant->fail("checkpoint_format", "'" + format + "' is not supported (supported: gptq, gptq_v2)");
  out.zero_bias = format == "gptq" ? 1 : 0;
  out.act_order = quant->get_bool("desc_act").value_or(false);
  return out;
}

std::vector<host_tensor> hf_int4_weights(const hf_int4_config& quant, const model_config& config,
                                         std::span<const safetensors_file> files, const hf_tensor_map& tensors) {
  const std::int64_t h = config.hidden_size, q = config.q_size(), kv = config.kv_size();
  const std::int64_t ffn = config.intermediate_size;
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> projections[] = {
      {"self_attn.q_proj", {q, h}}, {"self_attn.k_proj", {kv, h}}, {"self_attn.v_proj", {kv, h}},
      {"self_attn.o_proj", {h, q}}, {"mlp.gate_proj", {ffn, h}},   {"mlp.up_proj", {ffn, h}},
      {"mlp.down_proj", {h, ffn}},
  };
  const parts_reader reader(quant, files, tensors);
  std::vector<host_tensor> out;
  for (std::int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    for (const auto& [name, shape] : projections) {
      const std::string prefix = "model.layers." + std::to_string(layer) + "." + name;
      std::string file;
      const int32_tensor* qweight = reader.find_int32(prefix + ".qweight", file);
      if (qweight == nullptr) continue;
      auto source = std::make_shared<packed_source>(quant, reader.read(prefix, qweight, shape.first, shape.second));
      reader.check_zeros(prefix, *source);
      host_tensor tensor;
      tensor.name = prefix + ".weight";
      tensor.type = dtype::bf16;
      tensor.shape = {shape.first, shape.second};
      tensor.int4 = std::move(source);
      out.push_back(std::move(tensor));
    }
  }
  return out;
}

host_tensor expand_int4(const host_tensor& tensor, std::vector<std::unique_ptr<std::byte[]>>& storage) {
  const std::int64_t rows = tensor.shape.at(0), cols = tensor.shape.at(1), groups = cols / int4_source_group;
  const bool asymmetric = tensor.int4->format() == weight_quantization::int4_asym;
  auto buffer = std::make_unique<std::byte[]>(static_cast<std::size_t>(rows * cols) * 2);
  auto* bits = reinterpret_cast<std::uint16_t*>(buffer.get());
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(cols));
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(groups)), offsets(scales.size());
  for (std::int64_t n = 0; n < rows; ++n) {
    tensor.int4->read_rows(n, 1, codes.data(), scales.data(), offsets.data());
    for (std::int64_t k = 0; k < cols; ++k) {
      const auto g = static_cast<std::size_t>(k / int4_source_group);
      const float scale = f16_to_float(scales[g]);
      const float offset = asymmetric ? f16_to_float(offsets[g]) : -8.0f * scale;
      *bits++ = float_to_bf16(scale * static_cast<float>(codes[static_cast<std::size_t>(k)]) + offset);
    }
  }
  host_tensor out{tensor.name, dtype::bf16, tensor.shape, buffer.get()};
  storage.push_back(std::move(buffer));
  return out;
}

}  // namespace troupe
