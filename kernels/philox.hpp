#pragma once
// Philox-4x32-10 counter-based generator (Salmon et al., SC'11). The same
// header compiles for host and device so that a seeded request samples the
// same tokens on every backend, alone or in any batch, before and after a
// preemption: the draw for output token i of a request depends only on
// (seed, i).

#include <cstdint>

#if defined(__CUDACC__)
#define TROUPE_HOST_DEVICE __host__ __device__
#else
#define TROUPE_HOST_DEVICE
#endif

namespace troupe {

/// Four 32-bit outputs of one Philox block.
struct philox_block {
  std::uint32_t v[4];
};

/// Philox-4x32 with 10 rounds on a raw 128-bit counter and 64-bit key
/// (Random123's philox4x32_10).
TROUPE_HOST_DEVICE inline philox_block philox4x32_raw(philox_block counter, std::uint32_t key0, std::uint32_t key1) {
  std::uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c2;
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c0 = hi1 ^ c1 ^ key0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ key1;
    c3 = lo0;
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

/// Philox block for key `seed` and counter (`counter`, `stream`, 0).
TROUPE_HOST_DEVICE inline philox_block philox4x32(std::uint64_t seed, std::uint64_t counter, std::uint32_t stream = 0) {
  const philox_block words{
      {static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32), stream, 0u}};
  return philox4x32_raw(words, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

/// A uniform float in [0, 1) with 24 random bits, for output token
/// `token_index` of the request seeded with `seed`.
TROUPE_HOST_DEVICE inline float philox_uniform(std::uint64_t seed, std::uint64_t token_index) {
  const philox_block block = philox4x32(seed, token_index);
  return static_cast<float>(block.v[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace troupe
