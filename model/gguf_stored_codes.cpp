#include "model/gguf_stored_codes.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/dtype.hpp"
#include "model/gguf_dequantize.hpp"
#include "model/gguf_model.hpp"

namespace troupe {

namespace {

constexpr float f16_max = 65504.0f;

// Byte j of 16 holds element j in its low nibble and element j + 16 in its
// high one (Q4_0 / Q4_1). Copied out first so that the code stores cannot
// alias the bytes they are read from, and the loop vectorises.
void unpack_split_nibbles(const std::byte* at, std::uint8_t* codes) {
  std::uint8_t packed[16];
  std::memcpy(packed, at, 16);
  for (int j = 0; j < 16; ++j) {
    codes[j] = packed[j] & 0x0f;
    codes[j + 16] = packed[j] >> 4;
  }
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL: 32 weights a block, copied out as they are.
class gguf_block_source final : public stored_code_source {
 public:
  gguf_block_source(const gguf_tensor& tensor, std::int64_t rope_heads)
      : rows_(tensor, rope_heads),
        name_(tensor.name),
        format_(*gguf_stored_code_format(tensor.type)),
        asymmetric_(tensor.type == ggml_type::q4_1 || tensor.type == ggml_type::q5_1),
        fifth_bits_(tensor.type == ggml_type::q5_0 || tensor.type == ggml_type::q5_1) {}

  weight_quantization format() const override { return format_; }

  void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                 std::uint16_t* offsets) const override {
    const std::uint64_t blocks = rows_.row_length / 32;
    // f16 d (and f16 m), for Q5 32 fifth bits (bit j element j's), then 16 bytes of nibbles.
    const std::size_t header = (asymmetric_ ? 4 : 2) + (fifth_bits_ ? 4 : 0);
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < blocks; ++b, block += header + 16) {
        std::memcpy(scales, block, 2);
        if (asymmetric_) {
          std::memcpy(offsets++, block + 2, 2);
        } else if (fifth_bits_) {
          // Q5_0: x = d · (q − 16), so offset −16 d (exact in f16 unless it overflows).
          const float offset = -16.0f * f16_to_float(*scales);
          if (!(std::fabs(offset) <= f16_max))
            throw std::runtime_error("tensor '" + name_ + "': Q5_0 block " + std::to_string(b) + " of row " +
                                     std::to_string(first + i) + " has d " + std::to_string(offset / -16.0f) +
                                     ", whose offset -16 d leaves f16's range");
          *offsets++ = float_to_f16(offset);
        }
        ++scales;
        unpack_split_nibbles(block + header, codes);
        if (fifth_bits_) {
          std::uint32_t high;
          std::memcpy(&high, block + header - 4, 4);
          for (int j = 0; j < 32; ++j) codes[j] = static_cast<std::uint8_t>(codes[j] | ((high >> j) & 1u) << 4);
        }
        codes += 32;
      }
    }
  }

 private:
  gguf_rows rows_;
  std::string name_;
  weight_quantization format_;
  bool asymmetric_, fifth_bits_;
};

// IQ4_XS as int4_nl: each 32-weight sub-block is a group of scale d · (s − 32).
class gguf_iq4_xs_source final : public stored_code_source {
 public:
  gguf_iq4_xs_source(const gguf_tensor& tensor, std::int64_t rope_heads)
      : rows_(tensor, rope_heads), name_(tensor.name) {}

  weight_quantization format() const override { return weight_quantization::int4_nl; }

  bool has_block_factors() const override { return true; }

  // d with the sub-block scales s − 32 (−32..31) as signed bytes.
  void read_block_factors(std::int64_t first, std::int64_t count, std::uint16_t* block_scales, std::uint16_t*,
                          std::uint8_t* scale_codes, std::uint8_t*) const override {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < rows_.row_length / 256; ++b, block += block_bytes) {
        std::memcpy(block_scales++, block, 2);
        for (int j = 0; j < 8; ++j)
          *scale_codes++ = static_cast<std::uint8_t>(static_cast<std::int8_t>(gguf_iq4_xs_scale(block, j)));
      }
    }
  }

  void read_codes(std::int64_t first, std::int64_t count, std::uint8_t* codes) const override {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < rows_.row_length / 256; ++b, block += block_bytes) {
        for (int j = 0; j < 8; ++j, codes += 32) unpack_split_nibbles(block + 8 + 16 * j, codes);
      }
    }
  }

  void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                 std::uint16_t*) const override {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < rows_.row_length / 256; ++b, block += block_bytes) {
        std::uint16_t d;
        std::memcpy(&d, block, 2);
        // |s − 32| <= 32: a product past f16's range would be infinite in
        // these f16 scales (the file's own floats are finite): refused,
        // naming the block. read_codes and read_block_factors need none.
        if (!(std::fabs(f16_to_float(d)) * 32.0f <= f16_max))
          throw std::runtime_error("tensor '" + name_ + "': IQ4_XS block " + std::to_string(b) + " of row " +
                                   std::to_string(first + i) + " has d " + std::to_string(f16_to_float(d)) +
                                   ", whose products with its 6-bit scales leave f16's range");
        for (int j = 0; j < 8; ++j, codes += 32) {
          *scales++ = float_to_f16(f16_to_float(d) * static_cast<float>(gguf_iq4_xs_scale(block, j)));
          unpack_split_nibbles(block + 8 + 16 * j, codes);
        }
      }
    }
  }

 private:
  // A block: f16 d, 2 + 4 bytes of 6-bit sub-block scales, 8 × 16 bytes of nibbles as IQ4_NL's.
  static constexpr std::uint64_t block_bytes = 136;

  gguf_rows rows_;
  std::string name_;
};

float f16_at(const std::byte* at) {
  std::uint16_t bits;
  std::memcpy(&bits, at, 2);
  return f16_to_float(bits);
}

// Q4_K as int4_asym and Q5_K as int5_asym: each 32-weight sub-block is a group.
class gguf_k_source final : public stored_code_source {
 public:
  gguf_k_source(const gguf_tensor& tensor, std::int64_t rope_heads)
      : rows_(tensor, rope_heads), name_(tensor.name), type_(tensor.type) {}

  weight_quantization format() const override {
    return type_ == ggml_type::q5_k ? weight_quantization::int5_asym : weight_quantization::int4_asym;
  }

  bool has_block_factors() const override { return true; }

  // d and −dmin (f16 negation is exact) with the 6-bit scales and mins as they are.
  void read_block_factors(std::int64_t first, std::int64_t count, std::uint16_t* block_scales,
                          std::uint16_t* block_offsets, std::uint8_t* scale_codes,
                          std::uint8_t* offset_codes) const override {
    const std::uint64_t block_bytes = ggml_block_bytes(type_);
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < rows_.row_length / 256; ++b, block += block_bytes) {
        std::uint16_t d, dmin;
        std::memcpy(&d, block, 2);
        std::memcpy(&dmin, block + 2, 2);
        *block_scales++ = d;
        *block_offsets++ = static_cast<std::uint16_t>(dmin ^ 0x8000u);
        std::uint8_t packed[12];
        std::memcpy(packed, block + 4, 12);
        for (int j = 0; j < 8; ++j) gguf_q4_k_scale_min(j, packed, *scale_codes++, *offset_codes++);
      }
    }
  }

  void read_codes(std::int64_t first, std::int64_t count, std::uint8_t* codes) const override {
    const std::uint64_t block_bytes = ggml_block_bytes(type_);
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < rows_.row_length / 256; ++b, block += block_bytes, codes += 256)
        unpack_codes(block, codes);
    }
  }

  void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                 std::uint16_t* offsets) const override {
    const std::uint64_t block_bytes = ggml_block_bytes(type_);
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < rows_.row_length / 256; ++b, block += block_bytes, codes += 256) {
        const float d = f16_at(block), dmin = f16_at(block + 2);
        // A product past f16's range would be infinite in these f16 scales
        // (the file's own floats are finite): refused, naming the block.
        // read_codes and read_block_factors need no such product.
        if (!(std::max(std::fabs(d), std::fabs(dmin)) * 63.0f <= f16_max))
          throw std::runtime_error("tensor '" + name_ + "': " + std::string(ggml_type_name(type_)) + " block " +
                                   std::to_string(b) + " of row " + std::to_string(first + i) + " has d " +
                                   std::to_string(d) + " and dmin " + std::to_string(dmin) +
                                   ", whose products with its 6-bit scales leave f16's range");
        std::uint8_t packed[12];
        std::memcpy(packed, block + 4, 12);
        for (int j = 0; j < 8; ++j) {
          std::uint8_t scale, min;
          gguf_q4_k_scale_min(j, packed, scale, min);
          *scales++ = float_to_f16(d * static_cast<float>(scale));
          *offsets++ = float_to_f16(-(dmin * static_cast<float>(min)));
        }
        unpack_codes(block, codes);
      }
    }
  }

 private:
  // The 256 codes of one block in input order. A block: f16 d, f16 dmin,
  // 12 bytes of scales and mins, for Q5_K 32 bytes of fifth bits, then 128
  // bytes of nibbles. Each 32 bytes of nibbles hold two sub-blocks: the low
  // nibbles the first, the high nibbles the second; Q5_K's fifth bits of
  // sub-block j are bit j of the 32 bytes `high`.
  void unpack_codes(const std::byte* block, std::uint8_t* codes) const {
    const bool fifth_bits = type_ == ggml_type::q5_k;
    std::uint8_t high[32] = {};
    if (fifth_bits) std::memcpy(high, block + 16, 32);
    const std::byte* nibbles_at = block + (fifth_bits ? 48 : 16);
    std::uint8_t nibbles[32];
    for (int chunk = 0; chunk < 4; ++chunk) {
      std::memcpy(nibbles, nibbles_at + 32 * chunk, 32);
      for (int half = 0; half < 2; ++half, codes += 32) {
        const int bit = 2 * chunk + half;
        for (int l = 0; l < 32; ++l) {
          const int nibble = half == 0 ? nibbles[l] & 0x0f : nibbles[l] >> 4;
          codes[l] = static_cast<std::uint8_t>(nibble | ((high[l] >> bit) & 1) << 4);
        }
      }
    }
  }

  gguf_rows rows_;
  std::string name_;
  ggml_type type_;
};

// The 256 codes of one Q6_K block in input order. Each half of 128
// weights reads 64 bytes of nibbles and 32 of bit pairs: quarter j
// (weights 32 j + l) takes nibble j / 2 of byte 32 (j % 2) + l and bit pair
// j of byte l (gguf_dequantize's Q6_K).
void q6_k_codes(const std::byte* block, std::uint8_t* codes) {
  std::uint8_t low[64], high[32];
  for (int half = 0; half < 2; ++half, codes += 128) {
    std::memcpy(low, block + 64 * half, 64);
    std::memcpy(high, block + 128 + 32 * half, 32);
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int nibble = (low[32 * (j % 2) + l] >> (4 * (j / 2))) & 0x0f;
        codes[32 * j + l] = static_cast<std::uint8_t>(nibble | ((high[l] >> (2 * j)) & 3) << 4);
      }
    }
  }
}

// A Q6_K block's sixteen int8 sub-block scales, as they are.
void q6_k_scale_codes(const std::byte* block, std::uint8_t* scale_codes) { std::memcpy(scale_codes, block + 192, 16); }

// The 256 codes of one Q3_K block in input order. Weight 32 j + l (j 0..7,
// l 0..31) takes bit pair j % 4 of byte 32 (j / 4) + l of the 2-bit codes
// and bit j of byte l of the high bits (gguf_dequantize's Q3_K): q is the
// pair less 4 where that bit is clear, the pair where it is set, so the
// code q + 8 is the pair plus 4, or plus 8.
void q3_k_codes(const std::byte* block, std::uint8_t* codes) {
  std::uint8_t high[32], pairs[64];
  std::memcpy(high, block, 32);
  std::memcpy(pairs, block + 32, 64);
  for (int j = 0; j < 8; ++j, codes += 32) {
    for (int l = 0; l < 32; ++l) {
      const int pair = (pairs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3;
      codes[l] = static_cast<std::uint8_t>(pair + 4 + 4 * ((high[l] >> j) & 1));
    }
  }
}

// A Q3_K block's sixteen 6-bit sub-block scales less 32 (−32..31) as signed bytes.
void q3_k_scale_codes(const std::byte* block, std::uint8_t* scale_codes) {
  std::uint8_t packed[12];
  std::memcpy(packed, block + 96, 12);
  for (int j = 0; j < 16; ++j)
    scale_codes[j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(gguf_q3_k_scale(packed, j)));
}

// Where a 256-weight block of a type with a scale per 16 weights keeps its
// codes and factors.
struct half_group_block {
  weight_quantization format;
  const char* type_name;
  std::uint64_t block_bytes;
  std::uint64_t factor_at;                                         ///< byte offset of the block's f16 d
  void (*codes)(const std::byte* block, std::uint8_t* out);        ///< 256 codes in input order
  void (*scale_codes)(const std::byte* block, std::uint8_t* out);  ///< 16 signed bytes
};

// Q6_K (128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales, f16
// d): int6, each sub-block a half group of scale d · s. Q3_K (32 bytes of
// high bits, 64 of 2-bit codes, 12 of 6-bit scales, f16 d): int4_g16, each
// sub-block a half group of scale d · (s − 32), a weight's 3-bit value q
// (−4..3) its code q + 8 (4..11), so w = d · (s − 32) · (code − 8) is the
// file's weight exactly.
constexpr half_group_block q6_k_block{weight_quantization::int6, "Q6_K", 210, 208, q6_k_codes, q6_k_scale_codes};
constexpr half_group_block q3_k_block{weight_quantization::int4_g16, "Q3_K", 110, 108, q3_k_codes, q3_k_scale_codes};

// A matrix of blocks with a scale per 16 weights, read as their factors and codes.
class gguf_half_group_source final : public stored_code_source {
 public:
  gguf_half_group_source(const gguf_tensor& tensor, std::int64_t rope_heads, const half_group_block& block)
      : rows_(tensor, rope_heads), block_(block) {}

  weight_quantization format() const override { return block_.format; }

  bool has_block_factors() const override { return true; }

  void read_block_factors(std::int64_t first, std::int64_t count, std::uint16_t* block_scales, std::uint16_t*,
                          std::uint8_t* scale_codes, std::uint8_t*) const override {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < rows_.row_length / 256; ++b, block += block_.block_bytes, scale_codes += 16) {
        std::memcpy(block_scales++, block + block_.factor_at, 2);
        block_.scale_codes(block, scale_codes);
      }
    }
  }

  void read_codes(std::int64_t first, std::int64_t count, std::uint8_t* codes) const override {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < rows_.row_length / 256; ++b, block += block_.block_bytes, codes += 256)
        block_.codes(block, codes);
    }
  }

  void read_rows(std::int64_t, std::int64_t, std::uint8_t*, std::uint16_t*, std::uint16_t*) const override {
    throw std::logic_error(std::string("read_rows: a ") + block_.type_name +
                           " matrix has a scale per 16 inputs, which f16 scales per 32 cannot hold; read it with "
                           "read_codes and read_block_factors");
  }

 private:
  gguf_rows rows_;
  const half_group_block& block_;
};

}  // namespace

std::optional<weight_quantization> gguf_stored_code_format(ggml_type type) {
  if (type == ggml_type::q4_0) return weight_quantization::int4;
  if (type == ggml_type::iq4_nl || type == ggml_type::iq4_xs) return weight_quantization::int4_nl;
  if (type == ggml_type::q4_1 || type == ggml_type::q4_k) return weight_quantization::int4_asym;
  if (type == ggml_type::q5_0 || type == ggml_type::q5_1 || type == ggml_type::q5_k)
    return weight_quantization::int5_asym;
  if (type == ggml_type::q6_k) return weight_quantization::int6;
  if (type == ggml_type::q3_k) return weight_quantization::int4_g16;
  return std::nullopt;
}

std::shared_ptr<const stored_code_source> gguf_stored_code_source(const gguf_tensor& tensor, std::int64_t rope_heads) {
  if (!gguf_stored_code_format(tensor.type) || tensor.dims.size() != 2)
    throw std::runtime_error("tensor '" + tensor.name + "': a " + std::string(ggml_type_name(tensor.type)) +
                             " tensor of " + std::to_string(tensor.dims.size()) +
                             " dimensions is not a Q4_0 / Q4_1 / Q4_K / Q5_0 / Q5_1 / Q5_K / IQ4_NL / IQ4_XS / Q6_K / "
                             "Q3_K matrix");
  if (tensor.type == ggml_type::q4_k || tensor.type == ggml_type::q5_k)
    return std::make_shared<gguf_k_source>(tensor, rope_heads);
  if (tensor.type == ggml_type::iq4_xs) return std::make_shared<gguf_iq4_xs_source>(tensor, rope_heads);
  if (tensor.type == ggml_type::q6_k) return std::make_shared<gguf_half_group_source>(tensor, rope_heads, q6_k_block);
  if (tensor.type == ggml_type::q3_k) return std::make_shared<gguf_half_group_source>(tensor, rope_heads, q3_k_block);
  return std::make_shared<gguf_block_source>(tensor, rope_heads);
}

}  // namespace troupe
