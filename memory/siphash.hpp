#pragma once
// SipHash-2-4 with 128-bit output (Aumasson & Bernstein, 2012), used to name
// full KV blocks in the prefix cache. 128 bits make an accidental collision
// between two different token chains negligible (about 2^-64 after 2^32
// blocks), and the block manager also compares the block's own tokens.

#include <cstddef>
#include <cstdint>
#include <span>

namespace troupe {

/// A 128-bit digest: `lo` is the first 8 output bytes read little-endian, `hi` the last 8.
struct digest128 {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  friend bool operator==(const digest128&, const digest128&) = default;
};

/// Hasher for std::unordered_map keys (the digest is already uniform).
struct digest128_hash {
  std::size_t operator()(const digest128& d) const noexcept {
    return static_cast<std::size_t>(d.lo ^ (d.hi * 0x9E3779B97F4A7C15ull));
  }
};

/// The 128-bit key of SipHash: `k0` is bytes 0..7 read little-endian, `k1` bytes 8..15.
struct siphash_key {
  std::uint64_t k0 = 0x0706050403020100ull;
  std::uint64_t k1 = 0x0f0e0d0c0b0a0908ull;
};

/// A key drawn from std::random_device, so digests (and which prefixes
/// collide in the cache's index) cannot be predicted from outside the process.
siphash_key random_siphash_key();

/// SipHash-2-4-128 of `bytes` under `key`.
digest128 siphash24_128(std::span<const std::uint8_t> bytes, const siphash_key& key);

}  // namespace troupe
