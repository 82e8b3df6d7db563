#pragma once
// Hugging Face checkpoints quantised with AWQ or GPTQ (config.json's
// `quantization_config`): 4-bit ones read as troupe int4 groups of 32
// inputs without expanding them, 8-bit GPTQ ones dequantised to f16. Per
// quantised linear layer `<p>` ([out, in] in HF terms):
//
//   AWQ "gemm": <p>.qweight I32 [in, out/8], <p>.qzeros I32 [in/G, out/8],
//     <p>.scales F16 [in/G, out]; the 8 nibbles of a word (bits 4i..4i+3)
//     hold outputs 8c + {0, 2, 4, 6, 1, 3, 5, 7}[i]; w = scale · (q − zero).
//   GPTQ: <p>.qweight I32 [in/8, out], nibble i of word (r, n) is input 8r + i;
//     <p>.qzeros I32 [groups, out/8], nibble i is output 8c + i, stored as
//     (zero − 1) mod 16 (checkpoint_format "gptq", the default; "gptq_v2"
//     stores the zero itself); <p>.scales F16 [groups, out]; <p>.g_idx I32 [in], the
//     group of each input (optional: input k is in group k / G).
//   GPTQ 8-bit: the same with bytes for nibbles (4 codes or zeros per word):
//     qweight [in/4, out], qzeros [groups, out/4], zeros stored as zero − 1.
//
// A checkpoint group of G inputs (a multiple of 32, or -1: the whole row)
// becomes G / 32 troupe groups with its scale, so regrouping is exact;
// int4_asym's offset is −scale · zero rounded to f16 (within half an f16
// ulp of the product). GPTQ with sym true is int4 exactly (every zero 8).
// GPTQ act-order (desc_act) scatters a group's members over the inputs:
// the source then reads the inputs sorted by group, a permutation the
// backend applies to the activations (stored_code_source::input_permutation).
// 8-bit weights scale · (q − zero) are rounded to f16 (the checkpoint's own
// scale type; relative error at most 2^-11), at their natural positions.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/stored_code_source.hpp"
#include "kernels/tensor.hpp"
#include "model/model_config.hpp"
#include "model/safetensors.hpp"

namespace troupe {

/// What `quantization_config` says, validated.
struct hf_int4_config {
  std::string method;             ///< "awq" or "gptq"
  int bits = 4;                   ///< 4 (AWQ, GPTQ) or 8 (GPTQ)
  std::int64_t group_size = 128;  ///< inputs per checkpoint group; -1: the whole row
  bool symmetric = false;         ///< GPTQ sym: every zero is 2^(bits-1) (4 bits: 8, loaded as int4)
  std::int32_t zero_bias = 0;     ///< added to each stored zero (mod 2^bits): 1 for GPTQ's v1 format
  bool act_order = false;         ///< GPTQ desc_act: every layer must carry its g_idx
  /// The troupe format the layers run in on a backend with quantised
  /// kernels: 4 bits: int4 when symmetric (kept as stored), else int4_asym;
  /// 8 bits: int8 (requantised per output row from the f16 expansion).
  weight_quantization format() const;
};

/// The `quantization_config` of the config.json text `config_json`, or
/// nullopt when it has none. Throws std::runtime_error "<source>: field
/// 'quantization_config.bits' (3) ..." for a method, bit width (4; GPTQ
/// also 8), group size or packing troupe cannot load.
std::optional<hf_int4_config> parse_hf_int4_config(std::string_view config_json,
                                                   std::string_view source = "config.json");

/// Tensors by name across a checkpoint's files.
using hf_tensor_map = std::map<std::string, const host_tensor*, std::less<>>;

/// Every decoder layer's quantised projections as host tensors
/// "<prefix>.weight" of shape [out, in] from `config`, for the projections
/// that have a `<prefix>.qweight` (others keep their float weight): 4 bits:
/// `int4` set and data null; 8 bits: f16 data appended to `storage`. Throws
/// std::runtime_error "<file>: tensor '<prefix>.qzeros': ..." naming the
/// file and tensor of a missing or misshapen part, a group size that does
/// not divide the inputs, a g_idx entry out of range or a group without
/// group_size members, or an 8-bit weight beyond f16's range.
std::vector<host_tensor> hf_int4_weights(const hf_int4_config& quant, const model_config& config,
                                         std::span<const safetensors_file> files, const hf_tensor_map& tensors,
                                         std::vector<std::unique_ptr<std::byte[]>>& storage);

/// `tensor` (int4 set) expanded to a bf16 tensor whose bytes are appended
/// to `storage`, every weight at its natural input position.
host_tensor expand_int4(const host_tensor& tensor, std::vector<std::unique_ptr<std::byte[]>>& storage);

}  // namespace troupe
