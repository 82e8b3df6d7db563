#include "model/text/token_bytes.hpp"

#include "model/text/byte_level.hpp"
#include "model/text/decoder.hpp"

namespace troupe::text {
namespace {

constexpr std::string_view replacement_character = "\xEF\xBF\xBD";

/// A token decoded after `anchor`, so decoders that strip a leading space
/// at the start of the text (SentencePiece) keep it.
std::string decoded_after(const tokenizer& tok, std::optional<token_id> anchor, token_id id) {
  if (!anchor) return tok.decode(std::vector<token_id>{id}, false);
  const std::string prefix = tok.decode(std::vector<token_id>{*anchor}, false);
  std::string both = tok.decode(std::vector<token_id>{*anchor, id}, false);
  if (both.compare(0, prefix.size(), prefix) != 0) return tok.decode(std::vector<token_id>{id}, false);
  return both.substr(prefix.size());
}

std::string bytes_with_anchor(const tokenizer& tok, std::optional<token_id> anchor, token_id id) {
  const std::string* piece = tok.decode_piece(id, true);
  if (!piece || tok.is_special(id)) return {};
  const int fallback = byte_fallback_value(*piece);
  if (fallback >= 0) return std::string(1, static_cast<char>(fallback));
  std::string text = decoded_after(tok, anchor, id);
  const bool lossy =
      text.find(replacement_character) != std::string::npos && piece->find(replacement_character) == std::string::npos;
  if (!lossy) return text;
  std::string raw;
  if (byte_level_to_bytes(*piece, raw)) return raw;
  return text;
}

}  // namespace

std::string token_bytes(const tokenizer& tok, token_id id) { return bytes_with_anchor(tok, tok.token_to_id("a"), id); }

std::vector<std::string> vocabulary_bytes(const tokenizer& tok) {
  const auto anchor = tok.token_to_id("a");
  std::vector<std::string> out(static_cast<std::size_t>(tok.vocab_size()));
  for (std::size_t id = 0; id < out.size(); ++id) out[id] = bytes_with_anchor(tok, anchor, static_cast<token_id>(id));
  return out;
}

}  // namespace troupe::text
