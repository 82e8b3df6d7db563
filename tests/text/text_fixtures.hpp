#pragma once
// Access to tests/fixtures/text: the test strings, the golden records made by
// tools/fixtures/make_text_fixtures.py from HF `tokenizers`, and the real
// tokenizer files (loaded once per test binary).

#include <boost/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/text/tokenizer.hpp"

namespace troupe::text::testing {

/// One golden record (see the generator's RECORD FORMAT).
struct golden_record {
  std::string text;
  std::vector<token_id> ids;          ///< encode(text, add_special_tokens=false)
  std::vector<token_id> special_ids;  ///< encode(text, add_special_tokens=true)
  std::string decoded;                ///< decode(special_ids, skip_special_tokens=false)
  std::string decoded_skip;           ///< decode(special_ids, skip_special_tokens=true)
  std::string decoded_plain;          ///< decode(ids, skip_special_tokens=false)
};

/// The four real vocabularies.
inline const std::vector<std::string> vocabularies = {"llama3_1", "qwen3", "deepseek_v3", "mistral_spm"};

/// Path of a file under tests/fixtures/text.
std::string fixture_path(const std::string& relative);
/// Whole contents of a file.
std::string read_text_file(const std::string& path);
/// The shared test strings (strings.jsonl).
const std::vector<std::string>& test_strings();
/// Golden records of `vocabulary`, aligned with test_strings().
const std::vector<golden_record>& golden_records(const std::string& vocabulary);
/// Builds a golden record from a JSON object plus its input text.
golden_record parse_record(const boost::json::object& entry, std::string text);
/// The real tokenizer `vocabulary`, loaded once.
std::shared_ptr<const tokenizer> real_tokenizer(const std::string& vocabulary);

}  // namespace troupe::text::testing
