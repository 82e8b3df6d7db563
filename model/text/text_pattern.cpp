#include "model/text/text_pattern.hpp"

namespace troupe::text {

text_pattern text_pattern::literal(std::string text) {
  text_pattern pattern;
  if (text.empty()) {
    pattern.regex_ = std::make_shared<const regex>("", "empty literal pattern");
  } else {
    pattern.literal_ = std::move(text);
  }
  return pattern;
}

text_pattern text_pattern::regular(std::string_view pattern_text, std::string_view where) {
  text_pattern pattern;
  pattern.regex_ = std::make_shared<const regex>(pattern_text, where);
  return pattern;
}

void text_pattern::find_matches(std::string_view text, std::vector<match_range>& out) const {
  if (text.empty()) return;
  if (regex_) {
    regex_->find_all(text, out);
    return;
  }
  std::size_t position = 0;
  while ((position = text.find(literal_, position)) != std::string_view::npos) {
    out.push_back({position, position + literal_.size()});
    position += literal_.size();
  }
}

std::string text_pattern::replace_all(std::string_view text, std::string_view content) const {
  std::vector<match_range> matches;
  find_matches(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + matches.size() * content.size());
  std::size_t copied = 0;
  for (const match_range& match : matches) {
    out.append(text.substr(copied, match.begin - copied));
    out.append(content);
    copied = match.end;
  }
  out.append(text.substr(copied));
  return out;
}

text_pattern make_text_pattern(const json_field& node) {
  if (const auto literal_text = node.find("String")) return text_pattern::literal(std::string(literal_text->string()));
  if (const auto regex_text = node.find("Regex")) {
    try {
      return text_pattern::regular(regex_text->string(), regex_text->path());
    } catch (const regex_error& error) {
      regex_text->fail(error.detail());  // names the file, as every tokenizer.json error does
    }
  }
  node.fail("expected {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace troupe::text
