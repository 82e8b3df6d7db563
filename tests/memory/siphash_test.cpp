// SipHash-2-4-128 against the reference vectors published with the
// algorithm (vectors_sip128 of the authors' reference code: key 00..0f,
// message 00 01 .. len-1).

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "memory/siphash.hpp"

namespace troupe {
namespace {

struct reference_vector {
  std::size_t length;
  std::array<std::uint8_t, 16> digest;
};

const reference_vector kVectors[] = {
    {0, {0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6, 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93}},
    {1, {0xda, 0x87, 0xc1, 0xd8, 0x6b, 0x99, 0xaf, 0x44, 0x34, 0x76, 0x59, 0x11, 0x9b, 0x22, 0xfc, 0x45}},
    {7, {0xa1, 0xf1, 0xeb, 0xbe, 0xd8, 0xdb, 0xc1, 0x53, 0xc0, 0xb8, 0x4a, 0xa6, 0x1f, 0xf0, 0x82, 0x39}},
    {8, {0x3b, 0x62, 0xa9, 0xba, 0x62, 0x58, 0xf5, 0x61, 0x0f, 0x83, 0xe2, 0x64, 0xf3, 0x14, 0x97, 0xb4}},
    {15, {0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8, 0x11, 0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf, 0xc3, 0xd9}},
    {63, {0x51, 0x50, 0xd1, 0x77, 0x2f, 0x50, 0x83, 0x4a, 0x50, 0x3e, 0x06, 0x9a, 0x97, 0x3f, 0xbd, 0x7c}},
};

TEST(SipHash, MatchesTheReferenceVectors) {
  const siphash_key key;  // the default key is the reference key 00 01 .. 0f
  for (const reference_vector& v : kVectors) {
    std::vector<std::uint8_t> message(v.length);
    for (std::size_t i = 0; i < v.length; ++i) message[i] = static_cast<std::uint8_t>(i);
    const digest128 d = siphash24_128(message, key);
    std::array<std::uint8_t, 16> bytes{};
    for (int i = 0; i < 8; ++i) {
      bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(d.lo >> (8 * i));
      bytes[static_cast<std::size_t>(8 + i)] = static_cast<std::uint8_t>(d.hi >> (8 * i));
    }
    EXPECT_EQ(bytes, v.digest) << "message length " << v.length;
  }
}

TEST(SipHash, DependsOnTheKey) {
  const std::vector<std::uint8_t> message{1, 2, 3};
  siphash_key other;
  other.k1 ^= 1;
  EXPECT_NE(siphash24_128(message, siphash_key{}), siphash24_128(message, other));
}

}  // namespace
}  // namespace troupe
