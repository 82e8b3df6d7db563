// Fuzzes encode and decode of hostile text on the real fixture tokenizers
// (byte-level BPE with a regex pre-tokenizer, and SentencePiece-style BPE
// with byte fallback), in one call and through the incremental detokenizer. The first byte picks the tokenizer and the
// flags; the rest is the text, and also read as token ids (4 bytes each, so negative and out-of-vocabulary ids are
// common) to decode. Invalid UTF-8 must be refused with std::invalid_argument; nothing else may throw.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "fuzz_input.hpp"
#include "model/text/incremental_detokenizer.hpp"
#include "model/text/tokenizer.hpp"

namespace {

using troupe::text::tokenizer;

std::vector<std::shared_ptr<const tokenizer>> load_tokenizers() {
  std::vector<std::shared_ptr<const tokenizer>> all;
  for (const char* name : {"llama3_1", "mistral_spm"}) {
    all.push_back(tokenizer::load(std::string(TROUPE_FIXTURES_DIR) + "/text/tokenizers/" + name));
  }
  return all;
}

const std::vector<std::shared_ptr<const tokenizer>>* tokenizers_ptr = nullptr;

}  // namespace

// Loading the tokenizers takes seconds under the sanitizers: done here, not
// inside the first input, where libFuzzer's per-input timeout would count it.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizers_ptr = new std::vector<std::shared_ptr<const tokenizer>>(load_tokenizers());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::shared_ptr<const tokenizer>>& tokenizers = *tokenizers_ptr;
  if (size == 0) return 0;
  const std::shared_ptr<const tokenizer>& shared = tokenizers[data[0] % tokenizers.size()];
  const tokenizer& tok = *shared;
  const bool special = (data[0] & 2) != 0;
  const std::string_view text = troupe::fuzz::as_text(data + 1, size - 1);
  try {
    const std::vector<troupe::text::token_id> ids = tok.encode(text, special);
    (void)tok.decode(ids, !special);
  } catch (const std::invalid_argument&) {
    // not UTF-8: refused with the byte offset
  }
  std::vector<troupe::text::token_id> raw((size - 1) / sizeof(troupe::text::token_id));
  if (!raw.empty()) std::memcpy(raw.data(), data + 1, raw.size() * sizeof(troupe::text::token_id));
  (void)tok.decode(raw, special);
  troupe::text::incremental_detokenizer stream(shared, special);  // the streaming path of generated ids
  (void)stream.push(raw);
  (void)stream.finish();
  return 0;
}
