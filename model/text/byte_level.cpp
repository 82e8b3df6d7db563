#include "model/text/byte_level.hpp"

#include <array>

#include "base/utf8.hpp"

namespace troupe::text {

namespace {

/// Printable Latin-1 bytes keep their own code point.
constexpr bool keeps_own_char(unsigned b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct byte_level_tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8{};
  /// Code point -> byte + 1 (0 = not in the table); all table chars are < 0x144.
  std::array<std::uint16_t, 0x144> from_char{};

  byte_level_tables() {
    char32_t next_extra = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      to_char[b] = keeps_own_char(b) ? static_cast<char32_t>(b) : next_extra++;
      append_utf8(to_utf8[b], to_char[b]);
      from_char[to_char[b]] = static_cast<std::uint16_t>(b + 1);
    }
  }
};

const byte_level_tables& tables() {
  static const byte_level_tables instance;
  return instance;
}

}  // namespace

char32_t byte_level_char(unsigned char b) { return tables().to_char[b]; }

void append_byte_level(std::string_view bytes, std::string& out) {
  const auto& table = tables();
  for (const char b : bytes) out.append(table.to_utf8[static_cast<unsigned char>(b)]);
}

bool byte_level_to_bytes(std::string_view token, std::string& out) {
  const auto& table = tables();
  const std::size_t original_size = out.size();
  std::size_t pos = 0;
  while (pos < token.size()) {
    const char32_t c = decode_utf8(token, pos);
    if (c >= table.from_char.size() || table.from_char[c] == 0) {
      out.resize(original_size);
      return false;
    }
    out.push_back(static_cast<char>(table.from_char[c] - 1));
  }
  return true;
}

}  // namespace troupe::text
