#pragma once
// The packed tensors of one AWQ / GPTQ projection (model/hf_int4.hpp has
// the formats): found across a checkpoint's files, shape-checked, its
// g_idx validated and turned into an input order, and read back code by
// code. hf_int4.cpp builds troupe weights from these.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/hf_int4.hpp"

namespace troupe::hf_packed {

/// The parts of one quantised projection ([out, in] in HF terms), checked.
struct parts {
  const int32_tensor* qweight = nullptr;
  const int32_tensor* qzeros = nullptr;
  const std::uint16_t* scales = nullptr;  ///< f16 [groups][out]
  /// [in]: the checkpoint group of each input (g_idx, or k / group_size).
  std::vector<std::int32_t> group_of;
  /// [in]: the inputs sorted by group, stably (GPTQ act-order: each group's
  /// group_size members then lie together); empty when that is 0..in-1.
  std::vector<std::int32_t> permutation;
  std::int64_t out = 0, in = 0, groups = 0;
};

/// Decodes a projection's codes and zeros as the checkpoint means them.
class codes {
 public:
  codes(const hf_int4_config& quant, parts parts);

  const parts& layout() const { return parts_; }
  /// The zero of (group g, output n), 0..2^bits-1 (the v1 bias added back).
  int zero(std::int64_t g, std::int64_t n) const;
  /// The codes (0..2^bits-1) of input k for outputs first .. first + count - 1,
  /// to out[i * stride]: one contiguous stretch of qweight, its word row and
  /// shift found once (the loaders' hot loop: per weight it would cost a
  /// division by the codes per word and a column walk).
  void input_codes(std::int64_t k, std::int64_t first, std::int64_t count, std::uint8_t* out,
                   std::int64_t stride) const;
  /// Input j of the checkpoint's group order (parts::permutation).
  std::int64_t input(std::int64_t j) const {
    return parts_.permutation.empty() ? j : parts_.permutation[static_cast<std::size_t>(j)];
  }

 private:
  bool awq_;
  int bits_, per_word_;
  std::uint32_t mask_;
  std::int32_t zero_bias_;
  parts parts_;
};

/// Finds and checks the parts of projections; errors name the file and tensor.
class reader {
 public:
  reader(const hf_int4_config& quant, std::span<const safetensors_file> files, const hf_tensor_map& tensors)
      : quant_(quant), files_(files), tensors_(tensors) {}

  /// Tensor `name` of any file, `file` set to the file holding it; nullptr when absent.
  const int32_tensor* find_int32(const std::string& name, std::string& file) const;

  /// The parts of projection `prefix` ([out, in]) whose qweight is `qweight`.
  /// Throws std::runtime_error "<file>: tensor '<prefix>.<part>': ..." for a
  /// missing or misshapen part, a group size that does not divide the inputs,
  /// or a g_idx entry out of range or a group without group_size members.
  parts read(const std::string& prefix, const int32_tensor* qweight, std::int64_t out, std::int64_t in) const;

  /// Under sym, every zero of `decoded` must be 2^(bits-1) (8 for 4 bits).
  void check_zeros(const std::string& prefix, const codes& decoded) const;

  /// Throws "<file of the projection read last>: tensor '<tensor>': <message>".
  [[noreturn]] void fail(const std::string& tensor, const std::string& message) const;

 private:
  void expect_shape(const std::string& tensor, const std::vector<std::int64_t>& shape,
                    const std::vector<std::int64_t>& expected) const;
  void read_groups(const std::string& prefix, std::int64_t group, parts& parts) const;

  const hf_int4_config& quant_;
  std::span<const safetensors_file> files_;
  const hf_tensor_map& tensors_;
  mutable std::string file_;  // the file holding the projection read last, for errors
};

}  // namespace troupe::hf_packed
