#include "model/text/pre_tokenizer.hpp"

#include "base/utf8.hpp"
#include "model/text/byte_level.hpp"
#include "model/text/char_classes.hpp"
#include "model/text/split_behavior.hpp"
#include "model/text/text_pattern.hpp"

namespace troupe::text {

namespace {

/// Split: pattern matches (or their complement with invert) cut each piece.
class split_step final : public pre_tokenizer {
 public:
  split_step(text_pattern pattern, split_behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void pre_tokenize(split_text& input) const override {
    std::vector<text_piece> out;
    out.reserve(input.pieces.size() * 4);
    std::vector<match_range> matches;
    for (const text_piece& piece : input.pieces) {
      matches.clear();
      pattern_.find_matches(std::string_view(input.text).substr(piece.begin, piece.end - piece.begin), matches);
      split_sink sink(behavior_, piece, out);
      std::size_t covered = piece.begin;
      for (const match_range& match : matches) {
        const std::size_t begin = piece.begin + match.begin;
        const std::size_t end = piece.begin + match.end;
        if (covered != begin) sink.item(covered, begin, invert_);
        sink.item(begin, end, !invert_);
        covered = end;
      }
      if (covered != piece.end) sink.item(covered, piece.end, invert_);
      sink.finish();
    }
    input.pieces = std::move(out);
  }

 private:
  text_pattern pattern_;
  split_behavior behavior_;
  bool invert_;
};

/// Splits on characters that satisfy a predicate; each such character is one
/// match (Digits, WhitespaceSplit).
template <typename Predicate>
class char_split_step final : public pre_tokenizer {
 public:
  char_split_step(Predicate predicate, split_behavior behavior) : predicate_(predicate), behavior_(behavior) {}

  void pre_tokenize(split_text& input) const override {
    std::vector<text_piece> out;
    out.reserve(input.pieces.size() * 2);
    const std::string_view text = input.text;
    for (const text_piece& piece : input.pieces) {
      split_sink sink(behavior_, piece, out);
      std::size_t run_begin = piece.begin;
      std::size_t position = piece.begin;
      while (position < piece.end) {
        const std::size_t char_begin = position;
        if (!predicate_(decode_utf8(text, position))) continue;
        if (run_begin != char_begin) sink.item(run_begin, char_begin, false);
        sink.item(char_begin, position, true);
        run_begin = position;
      }
      if (run_begin != piece.end) sink.item(run_begin, piece.end, false);
      sink.finish();
    }
    input.pieces = std::move(out);
  }

 private:
  Predicate predicate_;
  split_behavior behavior_;
};

template <typename Predicate>
std::unique_ptr<pre_tokenizer> make_char_split(Predicate predicate, split_behavior behavior) {
  return std::make_unique<char_split_step<Predicate>>(predicate, behavior);
}

const text_pattern& gpt2_pattern() {
  static const text_pattern pattern = text_pattern::regular(
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "ByteLevel regex");
  return pattern;
}

/// ByteLevel: optional prefix space and GPT-2 split; spells bytes as
/// characters unless it is the last step (then the model reads raw bytes).
class byte_level_step final : public pre_tokenizer {
 public:
  byte_level_step(bool add_prefix_space, bool use_regex, bool spell_bytes)
      : add_prefix_space_(add_prefix_space),
        use_regex_(use_regex),
        spell_bytes_(spell_bytes),
        splitter_(gpt2_pattern(), split_behavior::isolated, false) {}

  void pre_tokenize(split_text& input) const override {
    if (add_prefix_space_) add_prefix_spaces(input);
    if (use_regex_) splitter_.pre_tokenize(input);
    if (spell_bytes_) spell(input);
  }

 private:
  static void add_prefix_spaces(split_text& input) {
    split_text result;
    result.text.reserve(input.text.size() + input.pieces.size());
    for (const text_piece& piece : input.pieces) {
      const std::size_t begin = result.text.size();
      if (input.text[piece.begin] != ' ') result.text.push_back(' ');
      result.text.append(input.text, piece.begin, piece.end - piece.begin);
      result.pieces.push_back({begin, result.text.size(), piece.at_origin});
    }
    input = std::move(result);
  }

  static void spell(split_text& input) {
    split_text result;
    result.text.reserve(input.text.size() * 2);
    for (const text_piece& piece : input.pieces) {
      const std::size_t begin = result.text.size();
      append_byte_level(std::string_view(input.text).substr(piece.begin, piece.end - piece.begin), result.text);
      result.pieces.push_back({begin, result.text.size(), piece.at_origin});
    }
    input = std::move(result);
  }

  bool add_prefix_space_;
  bool use_regex_;
  bool spell_bytes_;
  split_step splitter_;
};

enum class prepend_scheme { always, first, never };

/// Metaspace: spaces become the replacement character, a prefix is
/// prepended per the scheme, and pieces split before each replacement.
class metaspace_step final : public pre_tokenizer {
 public:
  metaspace_step(std::string replacement, prepend_scheme scheme, bool split)
      : replacement_(std::move(replacement)),
        scheme_(scheme),
        split_(split),
        splitter_(text_pattern::literal(replacement_), split_behavior::merged_with_next, false) {}

  void pre_tokenize(split_text& input) const override {
    split_text result;
    result.text.reserve(input.text.size() * 2);
    for (const text_piece& piece : input.pieces) {
      const std::size_t begin = result.text.size();
      const std::string_view source = std::string_view(input.text).substr(piece.begin, piece.end - piece.begin);
      const bool starts_with_replacement = source.starts_with(replacement_) || source.starts_with(' ');
      const bool wants_prefix =
          scheme_ == prepend_scheme::always || (scheme_ == prepend_scheme::first && piece.at_origin);
      if (wants_prefix && !starts_with_replacement) result.text.append(replacement_);
      for (const char c : source) {
        if (c == ' ') {
          result.text.append(replacement_);
        } else {
          result.text.push_back(c);
        }
      }
      result.pieces.push_back({begin, result.text.size(), piece.at_origin});
    }
    input = std::move(result);
    if (split_) splitter_.pre_tokenize(input);
  }

 private:
  std::string replacement_;
  prepend_scheme scheme_;
  bool split_;
  split_step splitter_;
};

class sequence_step final : public pre_tokenizer {
 public:
  explicit sequence_step(std::vector<std::unique_ptr<pre_tokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(split_text& input) const override {
    for (const auto& step : steps_) step->pre_tokenize(input);
  }

 private:
  std::vector<std::unique_ptr<pre_tokenizer>> steps_;
};

prepend_scheme parse_prepend_scheme(const json_field& node) {
  if (const auto scheme = node.find("prepend_scheme")) {
    const std::string_view name = scheme->string();
    if (name == "always") return prepend_scheme::always;
    if (name == "first") return prepend_scheme::first;
    if (name == "never") return prepend_scheme::never;
    scheme->fail("expected \"always\", \"first\" or \"never\"");
  }
  return node.get_bool("add_prefix_space").value_or(true) ? prepend_scheme::always : prepend_scheme::never;
}

std::unique_ptr<pre_tokenizer> make_step(const json_field& node, bool is_last, pre_tokenizer_info& info);

std::unique_ptr<pre_tokenizer> make_sequence(const json_field& node, bool is_last, pre_tokenizer_info& info) {
  const json_field list = node.at("pretokenizers");
  const std::size_t count = list.array().size();
  std::vector<std::unique_ptr<pre_tokenizer>> steps;
  for (std::size_t i = 0; i < count; ++i) steps.push_back(make_step(list.at(i), is_last && i + 1 == count, info));
  return std::make_unique<sequence_step>(std::move(steps));
}

std::unique_ptr<pre_tokenizer> make_step(const json_field& node, bool is_last, pre_tokenizer_info& info) {
  const std::string_view type = node.at("type").string();
  if (type == "Sequence") return make_sequence(node, is_last, info);
  if (is_last) info.ends_with_byte_level = type == "ByteLevel";
  if (type == "Split") {
    const bool invert = node.get_bool("invert").value_or(false);
    return std::make_unique<split_step>(make_text_pattern(node.at("pattern")),
                                        parse_split_behavior(node.at("behavior")), invert);
  }
  if (type == "ByteLevel") {
    return std::make_unique<byte_level_step>(node.get_bool("add_prefix_space").value_or(true),
                                             node.get_bool("use_regex").value_or(true), !is_last);
  }
  if (type == "Metaspace") {
    const std::string replacement(node.at("replacement").string());
    std::size_t position = 0;
    if (replacement.empty() || (decode_utf8(replacement, position), position != replacement.size())) {
      node.at("replacement").fail("expected exactly one character");
    }
    return std::make_unique<metaspace_step>(replacement, parse_prepend_scheme(node),
                                            node.get_bool("split").value_or(true));
  }
  if (type == "Digits") {
    const auto behavior =
        node.get_bool("individual_digits").value_or(false) ? split_behavior::isolated : split_behavior::contiguous;
    return make_char_split(is_unicode_numeric, behavior);
  }
  if (type == "WhitespaceSplit") return make_char_split(is_unicode_whitespace, split_behavior::removed);
  if (type == "Whitespace") {
    return std::make_unique<split_step>(text_pattern::regular("\\w+|[^\\w\\s]+", "Whitespace regex"),
                                        split_behavior::removed, true);
  }
  node.fail("unsupported pre_tokenizer type \"" + std::string(type) + "\"");
}

}  // namespace

std::unique_ptr<pre_tokenizer> make_pre_tokenizer(const json_field& node, pre_tokenizer_info& info) {
  info = {};
  return make_step(node, true, info);
}

}  // namespace troupe::text
