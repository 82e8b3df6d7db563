#include "model/text/added_vocabulary.hpp"

#include <algorithm>

#include "base/utf8.hpp"
#include "model/text/char_classes.hpp"

namespace troupe::text {

namespace {

std::size_t previous_char_start(std::string_view text, std::size_t end) {
  std::size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

bool is_word_char(char32_t c) { return c == '_' || is_unicode_alphanumeric(c); }

/// Whether the text before `end` ends with a word character.
bool ends_with_word(std::string_view text, std::size_t end) {
  if (end == 0) return false;
  std::size_t start = previous_char_start(text, end);
  return is_word_char(decode_utf8(text, start));
}

/// Whether the text from `begin` starts with a word character.
bool starts_with_word(std::string_view text, std::size_t begin) {
  if (begin >= text.size()) return false;
  return is_word_char(decode_utf8(text, begin));
}

/// Offset just after the last non-whitespace character before `end` (0 if none).
std::size_t after_last_non_space(std::string_view text, std::size_t end) {
  while (end > 0) {
    std::size_t start = previous_char_start(text, end);
    std::size_t probe = start;
    if (!is_unicode_whitespace(decode_utf8(text, probe))) return end;
    end = start;
  }
  return 0;
}

/// Offset of the first non-whitespace character at or after `begin` (text size if none).
std::size_t first_non_space(std::string_view text, std::size_t begin) {
  while (begin < text.size()) {
    std::size_t next = begin;
    if (!is_unicode_whitespace(decode_utf8(text, next))) return begin;
    begin = next;
  }
  return text.size();
}

}  // namespace

void token_trie::add(std::string_view pattern, std::int32_t value) {
  std::int32_t current = 0;
  for (const char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    auto& children = nodes_[current].children;
    auto found = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, std::int32_t{-1}));
    if (found == children.end() || found->first != byte) {
      const auto child = static_cast<std::int32_t>(nodes_.size());
      children.insert(found, {byte, child});
      nodes_.emplace_back();
      current = child;
    } else {
      current = found->second;
    }
  }
  nodes_[current].value = value;
  first_bytes_[static_cast<unsigned char>(pattern.front())] = true;
}

std::pair<std::size_t, std::int32_t> token_trie::longest_at(std::string_view text, std::size_t position) const {
  std::pair<std::size_t, std::int32_t> best{0, -1};
  std::int32_t current = 0;
  for (std::size_t i = position; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = nodes_[current].children;
    const auto found = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, std::int32_t{-1}));
    if (found == children.end() || found->first != byte) break;
    current = found->second;
    if (nodes_[current].value >= 0) best = {i + 1 - position, nodes_[current].value};
  }
  return best;
}

added_vocabulary::added_vocabulary(const json_field* list, const bpe_model& model, const normalizer* norm) {
  const std::size_t count = list != nullptr ? list->array().size() : 0;
  std::int32_t largest_added = -1;
  for (std::size_t i = 0; i < count; ++i) {
    const json_field entry = list->at(i);
    added_token token;
    token.content = entry.at("content").string();
    entry.at("id").integer(0, max_token_id);
    token.special = entry.get_bool("special").value_or(false);
    token.lstrip = entry.get_bool("lstrip").value_or(false);
    token.rstrip = entry.get_bool("rstrip").value_or(false);
    token.single_word = entry.get_bool("single_word").value_or(false);
    token.normalized = entry.get_bool("normalized").value_or(!token.special);
    if (token.content.empty() || by_content_.find(token.content) != string_map::missing) continue;
    // HF ignores the stored id: a token already in the model vocab keeps
    // that id, any other gets the next id after the vocab / added tokens.
    const auto vocab_entries = static_cast<std::int64_t>(model.vocab_entries());
    if (const auto existing = model.token_to_id(token.content)) {
      token.id = *existing;
    } else if (largest_added < 0) {
      token.id = static_cast<std::int32_t>(vocab_entries);
    } else {
      token.id = largest_added >= vocab_entries || vocab_entries == 0 ? largest_added + 1
                                                                      : static_cast<std::int32_t>(vocab_entries);
    }
    if (token.id > max_token_id) entry.at("id").fail("assigned id exceeds the supported range");
    largest_added = std::max(largest_added, token.id);
    const auto index = static_cast<std::int32_t>(tokens_.size());
    by_content_.insert(token.content, index);
    if (static_cast<std::size_t>(token.id) >= by_id_.size()) by_id_.resize(token.id + 1, -1);
    by_id_[token.id] = index;
    tokens_.push_back(std::move(token));
  }
  // HF matches a normalized token by its normalized content and also hands
  // that form to the decoder.
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    added_token& token = tokens_[i];
    token.spelling = token.content;
    if (token.normalized && norm != nullptr) norm->normalize(token.spelling);
    if (!token.spelling.empty()) {
      (token.normalized ? normalized_ : raw_).add(token.spelling, static_cast<std::int32_t>(i));
    }
  }
}

void added_vocabulary::split(std::string_view text, bool normalized_set, std::vector<added_split>& out) const {
  const token_trie& trie = normalized_set ? normalized_ : raw_;
  std::size_t start_offset = 0;
  std::size_t position = 0;
  while (!trie.empty() && position < text.size()) {
    if (!trie.may_start_with(static_cast<unsigned char>(text[position]))) {
      ++position;
      continue;
    }
    const auto [length, index] = trie.longest_at(text, position);
    if (length == 0) {
      ++position;
      continue;
    }
    std::size_t start = position;
    std::size_t stop = position + length;
    position = stop;
    const added_token& token = tokens_[index];
    if (token.single_word && (ends_with_word(text, start) || starts_with_word(text, stop))) continue;
    if (token.lstrip) start = std::max(after_last_non_space(text, start), start_offset);
    if (token.rstrip) stop = first_non_space(text, stop);
    if (start_offset < start) out.push_back({start_offset, start, added_split::plain});
    out.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), added_split::plain});
}

const added_token* added_vocabulary::find(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= by_id_.size() || by_id_[id] < 0) return nullptr;
  return &tokens_[by_id_[id]];
}

std::optional<std::int32_t> added_vocabulary::token_to_id(std::string_view content) const {
  const std::int32_t index = by_content_.find(content);
  if (index == string_map::missing) return std::nullopt;
  return tokens_[index].id;
}

bool added_vocabulary::is_special_content(std::string_view content) const {
  const std::int32_t index = by_content_.find(content);
  return index != string_map::missing && tokens_[index].special;
}

}  // namespace troupe::text
