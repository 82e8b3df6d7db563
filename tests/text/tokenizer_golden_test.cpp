// Encoding and decoding of >= 2,000 strings against HF `tokenizers` golden
// records, for the four real vocabularies.

#include <gtest/gtest.h>

#include <sstream>

#include "base/utf8.hpp"
#include "model/text/incremental_detokenizer.hpp"
#include "tests/text/text_fixtures.hpp"

namespace troupe::text::testing {
namespace {

std::string show_ids(const std::vector<token_id>& ids) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  out << "]";
  return out.str();
}

/// Collects mismatches; reports the count and the first few.
class mismatch_log {
 public:
  void add(std::size_t index, const std::string& what) {
    if (count_++ < 5) details_ << "\n  string #" << index << ": " << what;
  }
  std::size_t count() const { return count_; }
  std::string details() const { return details_.str(); }

 private:
  std::size_t count_ = 0;
  std::ostringstream details_;
};

class TokenizerGolden : public ::testing::TestWithParam<std::string> {
 protected:
  const tokenizer& tok() const { return *real_tokenizer(GetParam()); }
  const std::vector<golden_record>& records() const { return golden_records(GetParam()); }
};

TEST_P(TokenizerGolden, HasEnoughStrings) { EXPECT_GE(records().size(), 2000u); }

TEST_P(TokenizerGolden, EncodeMatchesHfWithoutSpecialTokens) {
  mismatch_log log;
  for (std::size_t i = 0; i < records().size(); ++i) {
    const auto& record = records()[i];
    const auto ids = tok().encode(record.text, false);
    if (ids != record.ids) log.add(i, "got " + show_ids(ids) + " want " + show_ids(record.ids));
  }
  EXPECT_EQ(log.count(), 0u) << log.details();
}

TEST_P(TokenizerGolden, EncodeMatchesHfWithSpecialTokens) {
  mismatch_log log;
  for (std::size_t i = 0; i < records().size(); ++i) {
    const auto& record = records()[i];
    const auto ids = tok().encode(record.text, true);
    if (ids != record.special_ids) log.add(i, "got " + show_ids(ids) + " want " + show_ids(record.special_ids));
  }
  EXPECT_EQ(log.count(), 0u) << log.details();
}

TEST_P(TokenizerGolden, DecodeMatchesHf) {
  mismatch_log log;
  for (std::size_t i = 0; i < records().size(); ++i) {
    const auto& record = records()[i];
    if (tok().decode(record.special_ids, false) != record.decoded) log.add(i, "decode(special ids)");
    if (tok().decode(record.special_ids, true) != record.decoded_skip) log.add(i, "decode(special ids, skip)");
    if (tok().decode(record.ids, false) != record.decoded_plain) log.add(i, "decode(ids)");
  }
  EXPECT_EQ(log.count(), 0u) << log.details();
}

TEST_P(TokenizerGolden, DecodeOfEncodeRoundTripsWhereLossless) {
  mismatch_log log;
  std::size_t lossless = 0;
  for (std::size_t i = 0; i < records().size(); ++i) {
    const auto& record = records()[i];
    // HF's own round trip tells whether the tokenizer is lossless on this string.
    const bool hf_lossless = record.decoded_plain == record.text;
    lossless += hf_lossless ? 1 : 0;
    const std::string round_trip = tok().decode(tok().encode(record.text, false), false);
    if (round_trip != (hf_lossless ? record.text : record.decoded_plain)) log.add(i, "round trip differs");
  }
  EXPECT_EQ(log.count(), 0u) << log.details();
  EXPECT_GT(lossless, records().size() / 2) << "most strings should survive a round trip";
}

TEST_P(TokenizerGolden, IncrementalDetokenizationEqualsFullDecode) {
  mismatch_log log;
  const auto shared = real_tokenizer(GetParam());
  for (std::size_t i = 0; i < records().size(); ++i) {
    const auto& record = records()[i];
    for (const bool skip : {false, true}) {
      incremental_detokenizer stream(shared, skip);
      std::string text;
      for (const token_id id : record.special_ids) {
        const std::string delta = stream.push(id);
        if (find_invalid_utf8(delta)) log.add(i, "delta is not complete UTF-8");
        text += delta;
      }
      text += stream.finish();
      if (text != (skip ? record.decoded_skip : record.decoded)) log.add(i, skip ? "skip_special" : "with specials");
    }
  }
  EXPECT_EQ(log.count(), 0u) << log.details();
}

INSTANTIATE_TEST_SUITE_P(RealVocabularies, TokenizerGolden, ::testing::ValuesIn(vocabularies),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace troupe::text::testing
