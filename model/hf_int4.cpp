#include "model/hf_int4.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include "base/parallel_blocks.hpp"
#include "model/checkpoint_json.hpp"
#include "model/hf_packed.hpp"

namespace troupe {

namespace {

// A 4-bit projection served to the backend as int4 groups of 32, in the
// checkpoint's group order (hf_packed::parts::permutation).
class packed_source final : public stored_code_source {
 public:
  packed_source(const hf_int4_config& quant, hf_packed::parts parts)
      : format_(quant.format()), codes_(quant, std::move(parts)) {
    const std::vector<std::int32_t>& order = codes_.layout().permutation;
    position_.resize(order.size());
    for (std::size_t j = 0; j < order.size(); ++j)
      position_[static_cast<std::size_t>(order[j])] = static_cast<std::int32_t>(j);
  }

  weight_quantization format() const override { return format_; }
  std::span<const std::int32_t> input_permutation() const override { return codes_.layout().permutation; }
  const hf_packed::codes& decoded() const { return codes_; }

  void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                 std::uint16_t* offsets) const override {
    const hf_packed::parts& parts = codes_.layout();
    const bool asymmetric = format_ == weight_quantization::int4_asym;
    for (std::int64_t n = first; n < first + count; ++n) {
      // Sorted by group, each run of 32 inputs lies in one group (of a multiple of 32).
      for (std::int64_t t = 0; t < parts.in / stored_code_group; ++t) {
        const std::int64_t g = parts.group_of[static_cast<std::size_t>(codes_.input(t * stored_code_group))];
        const std::uint16_t scale = parts.scales[g * parts.out + n];
        *scales++ = scale;
        if (asymmetric) *offsets++ = float_to_f16(-f16_to_float(scale) * static_cast<float>(codes_.zero(g, n)));
      }
    }
    // Input by input across all the rows asked for: both layouts put the
    // outputs of one input (AWQ) or of eight inputs (GPTQ) side by side, so
    // each step reads one contiguous stretch of qweight. A row at a time
    // walks down a column instead: for AWQ a new page per code when out is 8192.
    for (std::int64_t k = 0; k < parts.in; ++k) {
      const std::int64_t at = position_.empty() ? k : position_[static_cast<std::size_t>(k)];
      codes_.input_codes(k, first, count, codes + at, parts.in);
    }
  }

 private:
  weight_quantization format_;
  hf_packed::codes codes_;
  std::vector<std::int32_t> position_;  ///< [in]: where input k sits in the group order (empty: k)
};

// An 8-bit projection as f16 [out][in]: scale · (q − zero), rounded once.
host_tensor expand_8_bit(const hf_packed::reader& reader, const std::string& prefix, const hf_packed::codes& codes,
                         std::vector<std::unique_ptr<std::byte[]>>& storage) {
  const hf_packed::parts& parts = codes.layout();
  auto buffer = std::make_unique<std::byte[]>(static_cast<std::size_t>(parts.out * parts.in) * 2);
  auto* weights = reinterpret_cast<std::uint16_t*>(buffer.get());
  constexpr float f16_max = 65504.0f;
  // Codes a block of rows at a time, read input by input (input_codes: one
  // contiguous stretch of qweight each), then expanded row by row; blocks
  // spread over the cores.
  constexpr std::int64_t block_rows = 64;
  parallel_blocks(parts.out, block_rows, [&](std::int64_t first, std::int64_t end) {
    std::vector<float> scales(static_cast<std::size_t>(parts.groups));
    std::vector<int> zeros(scales.size());
    std::vector<std::uint8_t> block(static_cast<std::size_t>(block_rows * parts.in));
    for (std::int64_t k = 0; k < parts.in; ++k) codes.input_codes(k, first, end - first, block.data() + k, parts.in);
    for (std::int64_t n = first; n < end; ++n) {
      for (std::int64_t g = 0; g < parts.groups; ++g) {
        scales[static_cast<std::size_t>(g)] = f16_to_float(parts.scales[g * parts.out + n]);
        zeros[static_cast<std::size_t>(g)] = codes.zero(g, n);
      }
      const std::uint8_t* row_codes = block.data() + (n - first) * parts.in;
      std::uint16_t* bits = weights + n * parts.in;
      for (std::int64_t k = 0; k < parts.in; ++k) {
        const auto g = static_cast<std::size_t>(parts.group_of[static_cast<std::size_t>(k)]);
        const float weight = scales[g] * static_cast<float>(row_codes[k] - zeros[g]);  // exact in f32
        if (!(std::fabs(weight) <= f16_max))
          reader.fail(prefix + ".scales", "group " + std::to_string(g) + " of output " + std::to_string(n) +
                                              " gives weight " + std::to_string(weight) + " at input " +
                                              std::to_string(k) + ", beyond f16's range");
        bits[k] = float_to_f16(weight);
      }
    }
  });
  host_tensor out{prefix + ".weight", dtype::f16, {parts.out, parts.in}, buffer.get()};
  storage.push_back(std::move(buffer));
  return out;
}

}  // namespace

weight_quantization hf_int4_config::format() const {
  if (bits == 8) return weight_quantization::int8;
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
  const char* bits_key = quant->has("bits") || !awq ? "bits" : "w_bit";
  const std::int64_t bits = quant->at(bits_key).integer();
  if (bits != 4 && (awq || bits != 8))
    quant->fail(bits_key, "(" + std::to_string(bits) + ") is not supported (supported: " + (awq ? "4" : "4, 8") + ")");
  out.bits = static_cast<int>(bits);
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
                                         std::span<const safetensors_file> files, const hf_tensor_map& tensors,
                                         std::vector<std::unique_ptr<std::byte[]>>& storage) {
  const std::int64_t h = config.hidden_size, q = config.q_size(), kv = config.kv_size();
  const std::int64_t ffn = config.intermediate_size;
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> projections[] = {
      {"self_attn.q_proj", {q, h}}, {"self_attn.k_proj", {kv, h}}, {"self_attn.v_proj", {kv, h}},
      {"self_attn.o_proj", {h, q}}, {"mlp.gate_proj", {ffn, h}},   {"mlp.up_proj", {ffn, h}},
      {"mlp.down_proj", {h, ffn}},
  };
  const hf_packed::reader reader(quant, files, tensors);
  std::vector<host_tensor> out;
  for (std::int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    for (const auto& [name, shape] : projections) {
      const std::string prefix = "model.layers." + std::to_string(layer) + "." + name;
      std::string file;
      const int32_tensor* qweight = reader.find_int32(prefix + ".qweight", file);
      if (qweight == nullptr) continue;
      hf_packed::parts parts = reader.read(prefix, qweight, shape.first, shape.second);
      if (quant.bits == 8) {
        const hf_packed::codes codes(quant, std::move(parts));
        reader.check_zeros(prefix, codes);
        out.push_back(expand_8_bit(reader, prefix, codes, storage));
        continue;
      }
      auto source = std::make_shared<packed_source>(quant, std::move(parts));
      reader.check_zeros(prefix, source->decoded());
      host_tensor tensor;
      tensor.name = prefix + ".weight";
      tensor.type = dtype::bf16;
      tensor.shape = {shape.first, shape.second};
      tensor.stored_codes = std::move(source);
      out.push_back(std::move(tensor));
    }
  }
  return out;
}

host_tensor expand_int4(const host_tensor& tensor, std::vector<std::unique_ptr<std::byte[]>>& storage) {
  const std::int64_t rows = tensor.shape.at(0), cols = tensor.shape.at(1);
  auto buffer = std::make_unique<std::byte[]>(static_cast<std::size_t>(rows * cols) * 2);
  auto* bits = reinterpret_cast<std::uint16_t*>(buffer.get());
  constexpr std::int64_t block_rows = 16;
  parallel_blocks(rows, block_rows, [&](std::int64_t first, std::int64_t end) {
    std::vector<float> block(static_cast<std::size_t>((end - first) * cols));
    decode_stored_code_rows(*tensor.stored_codes, first, end - first, cols, block.data());
    convert_elements(block.data(), dtype::f32, bits + first * cols, dtype::bf16, block.size());
  });
  host_tensor out{tensor.name, dtype::bf16, tensor.shape, buffer.get()};
  storage.push_back(std::move(buffer));
  return out;
}

}  // namespace troupe
