#include "model/gguf_dequantize.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>

#include "kernels/dtype.hpp"

namespace troupe {

namespace {

std::uint16_t load_u16(const std::byte* at) {
  std::uint16_t bits;
  std::memcpy(&bits, at, 2);
  return bits;
}

float load_f16(const std::byte* at) { return f16_to_float(load_u16(at)); }

std::uint8_t byte_at(const std::byte* at, std::size_t i) { return std::to_integer<std::uint8_t>(at[i]); }

// The 16 bytes of nibbles of a Q4_0 / Q4_1 block.
std::array<std::uint8_t, 16> nibbles_of(const std::byte* at) {
  std::array<std::uint8_t, 16> bytes;
  std::memcpy(bytes.data(), at, bytes.size());
  return bytes;
}

// Q8_0: f16 scale d, then 32 int8 values q; x = d * q.
void q8_0_block(const std::byte* block, float* out) {
  const float d = load_f16(block);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(static_cast<std::int8_t>(byte_at(block + 2, i)));
}

// Q4_0: f16 scale d, then 16 bytes; the low nibbles are elements 0..15, the
// high nibbles 16..31, each offset by 8.
// The nibbles are copied out first (nibbles_of) so that the float stores
// cannot alias the bytes they are read from, and the loop vectorises.
void q4_0_block(const std::byte* block, float* out) {
  const float d = load_f16(block);
  const std::array<std::uint8_t, 16> packed = nibbles_of(block + 2);
  for (int i = 0; i < 16; ++i) {
    out[i] = d * static_cast<float>((packed[i] & 0x0f) - 8);
    out[i + 16] = d * static_cast<float>((packed[i] >> 4) - 8);
  }
}

// Q4_1: f16 scale d and minimum m, then 16 bytes of nibbles as in Q4_0; x = d * q + m.
void q4_1_block(const std::byte* block, float* out) {
  const float d = load_f16(block);
  const float m = load_f16(block + 2);
  const std::array<std::uint8_t, 16> packed = nibbles_of(block + 4);
  for (int i = 0; i < 16; ++i) {
    out[i] = d * static_cast<float>(packed[i] & 0x0f) + m;
    out[i + 16] = d * static_cast<float>(packed[i] >> 4) + m;
  }
}

// Q5_0 / Q5_1: f16 d (and for Q5_1 f16 m), 32 high bits (bit j for
// element j), then 16 bytes of low nibbles as in Q4_0; q = nibble | high << 4,
// x = d * (q - 16) or d * q + m.
void q5_block(const std::byte* block, float* out, bool with_min) {
  const float d = load_f16(block);
  const float m = with_min ? load_f16(block + 2) : -16.0f * d;
  const std::byte* rest = block + (with_min ? 4 : 2);
  std::uint32_t high;
  std::memcpy(&high, rest, 4);
  const std::array<std::uint8_t, 16> packed = nibbles_of(rest + 4);
  for (int i = 0; i < 16; ++i) {
    const auto low_q = static_cast<float>((packed[i] & 0x0f) | (((high >> i) & 1u) << 4));
    const auto high_q = static_cast<float>((packed[i] >> 4) | (((high >> (i + 16)) & 1u) << 4));
    out[i] = d * low_q + m;
    out[i + 16] = d * high_q + m;
  }
}

void q5_0_block(const std::byte* block, float* out) { q5_block(block, out, false); }
void q5_1_block(const std::byte* block, float* out) { q5_block(block, out, true); }

// Element e of a 256-block whose 2-bit codes fill 64 bytes as Q2_K and
// Q3_K pack them: two halves of 128 elements, each 32 bytes whose bit pairs
// 2j, 2j + 1 hold elements 32j .. 32j + 31 of the half.
int two_bit_code(const std::uint8_t* codes, int e) {
  const int half = e / 128, j = (e % 128) / 32, l = e % 32;
  return (codes[32 * half + l] >> (2 * j)) & 3;
}

// Q2_K: 256 elements as 16 sub-blocks of 16; 16 bytes of scales (low
// nibble) and mins (high nibble), 64 bytes of 2-bit codes, f16 d and dmin;
// x = d * scale * q - dmin * min.
void q2_k_block(const std::byte* block, float* out) {
  std::uint8_t scales[16], codes[64];
  std::memcpy(scales, block, 16);
  std::memcpy(codes, block + 16, 64);
  const float d = load_f16(block + 80);
  const float dmin = load_f16(block + 82);
  for (int e = 0; e < 256; ++e) {
    const std::uint8_t sm = scales[e / 16];
    out[e] = d * static_cast<float>(sm & 0x0f) * static_cast<float>(two_bit_code(codes, e)) -
             dmin * static_cast<float>(sm >> 4);
  }
}

// Q3_K: 256 elements as 16 sub-blocks of 16; 32 bytes of high bits (bit k
// of byte l is element 32k + l's), 64 bytes of 2-bit codes as Q2_K's, 12
// bytes of 6-bit scales (gguf_q3_k_scale), f16 d. q = code - 4 where the
// high bit is clear, code where it is set; x = d * (scale - 32) * q.
void q3_k_block(const std::byte* block, float* out) {
  std::uint8_t high[32], codes[64], packed[12];
  std::memcpy(high, block, 32);
  std::memcpy(codes, block + 32, 64);
  std::memcpy(packed, block + 96, 12);
  const float d = load_f16(block + 108);
  float scales[16];
  for (int i = 0; i < 16; ++i) scales[i] = d * static_cast<float>(gguf_q3_k_scale(packed, i));
  for (int e = 0; e < 256; ++e) {
    const int set = (high[e % 32] >> (e / 32)) & 1;
    out[e] = scales[e / 16] * static_cast<float>(two_bit_code(codes, e) - (set ? 0 : 4));
  }
}

// Q4_K: 256 elements as 8 sub-blocks of 32; f16 d and dmin, 12 bytes of
// scales/mins, 128 bytes of nibbles (each 32 bytes hold two sub-blocks:
// low nibbles first, then high); x = d * scale * q - dmin * min.
void q4_k_block(const std::byte* block, float* out) {
  const float d = load_f16(block);
  const float dmin = load_f16(block + 2);
  std::uint8_t packed[12];
  std::memcpy(packed, block + 4, 12);
  const std::byte* q = block + 16;
  for (int chunk = 0; chunk < 4; ++chunk) {
    std::uint8_t scale_lo, min_lo, scale_hi, min_hi;
    gguf_q4_k_scale_min(2 * chunk, packed, scale_lo, min_lo);
    gguf_q4_k_scale_min(2 * chunk + 1, packed, scale_hi, min_hi);
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t v = byte_at(q, l);
      out[l] = d * scale_lo * static_cast<float>(v & 0x0f) - dmin * min_lo;
      out[l + 32] = d * scale_hi * static_cast<float>(v >> 4) - dmin * min_hi;
    }
    q += 32;
    out += 64;
  }
}

// Q5_K: as Q4_K, with 32 bytes of fifth bits after the scales: for the
// 64 elements of chunk c, bit 2c of byte l is element l's and bit 2c + 1
// element l + 32's; x = d * scale * q - dmin * min, q in 0..31.
void q5_k_block(const std::byte* block, float* out) {
  const float d = load_f16(block);
  const float dmin = load_f16(block + 2);
  std::uint8_t packed[12], high[32], low[128];
  std::memcpy(packed, block + 4, 12);
  std::memcpy(high, block + 16, 32);
  std::memcpy(low, block + 48, 128);
  for (int chunk = 0; chunk < 4; ++chunk) {
    std::uint8_t scale_lo, min_lo, scale_hi, min_hi;
    gguf_q4_k_scale_min(2 * chunk, packed, scale_lo, min_lo);
    gguf_q4_k_scale_min(2 * chunk + 1, packed, scale_hi, min_hi);
    const std::uint8_t* q = low + 32 * chunk;
    for (int l = 0; l < 32; ++l) {
      const int q_lo = (q[l] & 0x0f) | (((high[l] >> (2 * chunk)) & 1) << 4);
      const int q_hi = (q[l] >> 4) | (((high[l] >> (2 * chunk + 1)) & 1) << 4);
      out[l] = d * scale_lo * static_cast<float>(q_lo) - dmin * min_lo;
      out[l + 32] = d * scale_hi * static_cast<float>(q_hi) - dmin * min_hi;
    }
    out += 64;
  }
}

// Q6_K: 256 elements; 128 bytes of low nibbles, 64 bytes of high 2-bit
// pairs, 16 int8 scales (one per 16 elements), f16 d; x = d * scale * (q - 32).
void q6_k_block(const std::byte* block, float* out) {
  const std::byte* ql = block;
  const std::byte* qh = block + 128;
  const std::byte* scales = block + 192;
  const float d = load_f16(block + 208);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const std::uint8_t low_a = byte_at(ql, l), low_b = byte_at(ql, l + 32), high = byte_at(qh, l);
      const int q1 = ((low_a & 0x0f) | ((high & 3) << 4)) - 32;
      const int q2 = ((low_b & 0x0f) | (((high >> 2) & 3) << 4)) - 32;
      const int q3 = ((low_a >> 4) | (((high >> 4) & 3) << 4)) - 32;
      const int q4 = ((low_b >> 4) | (((high >> 6) & 3) << 4)) - 32;
      const auto scale = [&](int k) { return static_cast<float>(static_cast<std::int8_t>(byte_at(scales, k))); };
      out[l] = d * scale(is) * static_cast<float>(q1);
      out[l + 32] = d * scale(is + 2) * static_cast<float>(q2);
      out[l + 64] = d * scale(is + 4) * static_cast<float>(q3);
      out[l + 96] = d * scale(is + 6) * static_cast<float>(q4);
    }
    out += 128;
    ql += 64;
    qh += 32;
    scales += 8;
  }
}

// IQ4_NL / IQ4_XS: each 4-bit code picks one of 16 int8 levels.
constexpr float iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// 16 bytes of codes as in Q4_0 (low nibbles elements 0..15, high 16..31), times `scale`.
void iq4_group(const std::byte* codes, float scale, float* out) {
  const std::array<std::uint8_t, 16> packed = nibbles_of(codes);
  for (int i = 0; i < 16; ++i) {
    out[i] = scale * iq4_levels[packed[i] & 0x0f];
    out[i + 16] = scale * iq4_levels[packed[i] >> 4];
  }
}

// IQ4_NL: f16 d, 16 bytes of codes; x = d * level[q].
void iq4_nl_block(const std::byte* block, float* out) { iq4_group(block + 2, load_f16(block), out); }

// IQ4_XS: 256 elements; f16 d, 16 bits of high scale bits (2 per sub-block),
// 4 bytes of low scale nibbles, then 8 sub-blocks of 16 code bytes as
// IQ4_NL's; sub-block j's scale is d * (s_j - 32), s_j 6 bits.
void iq4_xs_block(const std::byte* block, float* out) {
  const float d = load_f16(block);
  for (int j = 0; j < 8; ++j)
    iq4_group(block + 8 + 16 * j, d * static_cast<float>(gguf_iq4_xs_scale(block, j)), out + 32 * j);
}

struct block_expander {
  ggml_type type;
  void (*expand)(const std::byte* block, float* out);
};

constexpr block_expander block_expanders[] = {
    {ggml_type::q8_0, q8_0_block}, {ggml_type::q4_0, q4_0_block},     {ggml_type::q4_1, q4_1_block},
    {ggml_type::q2_k, q2_k_block}, {ggml_type::q3_k, q3_k_block},     {ggml_type::q5_0, q5_0_block},
    {ggml_type::q5_1, q5_1_block}, {ggml_type::q4_k, q4_k_block},     {ggml_type::q5_k, q5_k_block},
    {ggml_type::q6_k, q6_k_block}, {ggml_type::iq4_nl, iq4_nl_block}, {ggml_type::iq4_xs, iq4_xs_block},
};

}  // namespace

int gguf_iq4_xs_scale(const std::byte* block, int j) {
  const int low = (byte_at(block + 4, static_cast<std::size_t>(j / 2)) >> (4 * (j % 2))) & 0x0f;
  return (low | (((load_u16(block + 2) >> (2 * j)) & 3) << 4)) - 32;
}

// Scale i's low nibble is byte i's (i < 8) or byte i - 8's high nibble; its
// top two bits are bits 2(i / 4) of byte 8 + i % 4.
int gguf_q3_k_scale(const std::uint8_t* packed, int i) {
  const int low = (packed[i % 8] >> (4 * (i / 8))) & 0x0f;
  const int top = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (top << 4)) - 32;
}

void gguf_q4_k_scale_min(int j, const std::uint8_t* packed, std::uint8_t& scale, std::uint8_t& min) {
  if (j < 4) {
    scale = packed[j] & 63;
    min = packed[j + 4] & 63;
  } else {
    scale = static_cast<std::uint8_t>((packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4));
    min = static_cast<std::uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

void gguf_dequantize(ggml_type type, const std::byte* data, float* out, std::uint64_t elements) {
  switch (type) {
    case ggml_type::f32:
      std::memcpy(out, data, elements * 4);
      return;
    case ggml_type::f16:
      for (std::uint64_t i = 0; i < elements; ++i) out[i] = load_f16(data + 2 * i);
      return;
    case ggml_type::bf16:
      for (std::uint64_t i = 0; i < elements; ++i) out[i] = bf16_to_float(load_u16(data + 2 * i));
      return;
    default:
      break;
  }
  const auto found = std::find_if(std::begin(block_expanders), std::end(block_expanders),
                                  [&](const block_expander& e) { return e.type == type; });
  if (found == std::end(block_expanders))
    throw std::logic_error("gguf_dequantize: no expander for " + std::string(ggml_type_name(type)));
  const auto expand = found->expand;
  const std::uint64_t block_elements = ggml_block_elements(type), block_bytes = ggml_block_bytes(type);
  for (std::uint64_t b = 0; b < elements / block_elements; ++b)
    expand(data + b * block_bytes, out + b * block_elements);
}

}  // namespace troupe
