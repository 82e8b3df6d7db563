// Fuzzes loading a hostile tokenizer.json (and tokenizer_config.json), then
// encoding and decoding with whatever loads. Input: tokenizer.json, a NUL,
// then the text to encode; the text's bytes are also decoded as token ids.
// Loading may refuse with std::runtime_error naming the field; encoding may
// refuse invalid UTF-8 with std::invalid_argument.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "fuzz_input.hpp"
#include "model/text/tokenizer.hpp"

namespace {

/// Sent as tokenizer_config.json: makes the loader resolve the special tokens.
constexpr std::string_view tokenizer_config =
    R"({"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "add_bos_token": true})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using troupe::text::token_id;
  const auto [json, text] = troupe::fuzz::split_at_nul(troupe::fuzz::as_text(data, size));
  std::shared_ptr<const troupe::text::tokenizer> tok;
  try {
    tok = troupe::text::tokenizer::from_json(json, tokenizer_config);
  } catch (const std::runtime_error&) {
    return 0;  // refused: the expected outcome for most inputs
  }
  (void)tok->vocab_size();
  try {
    const std::vector<token_id> ids = tok->encode(text, true);
    (void)tok->decode(ids, false);
  } catch (const std::invalid_argument&) {
    // not UTF-8
  }
  std::vector<token_id> raw(text.size() / sizeof(token_id));
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * sizeof(token_id));
  (void)tok->decode(raw, true);
  return 0;
}
