#include "memory/siphash.hpp"

#include <random>

namespace troupe {

namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

struct sip_state {
  std::uint64_t v0, v1, v2, v3;

  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }

  void compress(std::uint64_t word) {
    v3 ^= word;
    round();
    round();
    v0 ^= word;
  }

  std::uint64_t finish_half(std::uint64_t marker, int which) {
    (which == 0 ? v2 : v1) ^= marker;
    for (int i = 0; i < 4; ++i) round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

std::uint64_t load_le(const std::uint8_t* p, std::size_t n) {
  std::uint64_t word = 0;
  for (std::size_t i = 0; i < n; ++i) word |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return word;
}

}  // namespace

digest128 siphash24_128(std::span<const std::uint8_t> bytes, const siphash_key& key) {
  sip_state s{key.k0 ^ 0x736f6d6570736575ull, key.k1 ^ 0x646f72616e646f6dull, key.k0 ^ 0x6c7967656e657261ull,
              key.k1 ^ 0x7465646279746573ull};
  s.v1 ^= 0xee;  // the 128-bit variant's domain separation
  const std::size_t full_words = bytes.size() / 8;
  for (std::size_t w = 0; w < full_words; ++w) s.compress(load_le(bytes.data() + 8 * w, 8));
  const std::size_t tail = bytes.size() - 8 * full_words;
  const std::uint64_t last =
      load_le(bytes.data() + 8 * full_words, tail) | (static_cast<std::uint64_t>(bytes.size() & 0xff) << 56);
  s.compress(last);
  digest128 out;
  out.lo = s.finish_half(0xee, 0);
  out.hi = s.finish_half(0xdd, 1);
  return out;
}

siphash_key random_siphash_key() {
  std::random_device source;
  const auto draw = [&source] { return (static_cast<std::uint64_t>(source()) << 32) ^ source(); };
  return {draw(), draw()};
}

}  // namespace troupe
