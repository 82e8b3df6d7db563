#include "model/chat/lexer.hpp"

#include <array>
#include <cstdlib>

#include "model/chat/errors.hpp"
#include "model/chat/lexer_literals.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

enum class tag_kind { variable, block, comment };

class lexer {
 public:
  explicit lexer(std::string_view src) : src_(src) {}

  std::vector<token> run() {
    while (pos_ < src_.size()) root_step();
    push(token_type::eof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  void push(token_type type, std::string text, std::size_t offset) {
    token t;
    t.type = type;
    t.text = std::move(text);
    t.offset = offset;
    tokens_.push_back(std::move(t));
  }

  /// Finds the next "{{", "{%" or "{#" at or after pos_.
  std::size_t find_tag(tag_kind& kind) const {
    for (std::size_t p = src_.find('{', pos_); p != std::string_view::npos; p = src_.find('{', p + 1)) {
      if (p + 1 >= src_.size()) break;
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') {
        kind = c == '{' ? tag_kind::variable : (c == '%' ? tag_kind::block : tag_kind::comment);
        return p;
      }
    }
    return std::string_view::npos;
  }

  /// Applies `-` (rstrip) or lstrip_blocks to the text before a tag.
  std::string_view strip_before(std::string_view text, char sign, bool lstrip_allowed) const {
    if (sign == '-') return rstrip_space(text);
    if (sign == '+' || !lstrip_allowed) return text;
    std::size_t nl = text.rfind('\n');
    std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting_) return text;
    std::string_view tail = text.substr(l_pos);
    if (!tail.empty() && all_space(tail)) return text.substr(0, l_pos);
    return text;
  }

  void root_step() {
    tag_kind kind{};
    std::size_t tag = find_tag(kind);
    if (tag == std::string_view::npos) {
      push(token_type::data, std::string(src_.substr(pos_)), pos_);
      pos_ = src_.size();
      return;
    }
    std::size_t after = tag + 2;
    char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
    std::size_t raw_end = kind == tag_kind::block ? match_raw_begin(after + (sign != 0 ? 1 : 0)) : 0;
    std::string_view text = strip_before(src_.substr(pos_, tag - pos_), sign, kind != tag_kind::variable);
    if (!text.empty()) push(token_type::data, std::string(text), pos_);
    pos_ = after + (sign != 0 ? 1 : 0);
    if (raw_end != 0) {
      line_starting_ = src_[raw_end - 1] == '\n';
      pos_ = raw_end;
      lex_raw(tag);
    } else if (kind == tag_kind::comment) {
      lex_comment(tag);
    } else {
      lex_tag(kind, tag);
    }
  }

  /// If "\s*raw\s*(-%}\s*|%})" starts at p, returns the end of the match, else 0.
  std::size_t match_raw_begin(std::size_t p) const {
    p = skip_space(p);
    if (src_.substr(p, 3) != "raw") return 0;
    p = skip_space(p + 3);
    if (src_.substr(p, 3) == "-%}") return skip_space(p + 3);
    if (src_.substr(p, 2) == "%}") return p + 2;
    return 0;
  }

  void lex_raw(std::size_t begin_offset) {
    for (std::size_t p = src_.find("{%", pos_); p != std::string_view::npos; p = src_.find("{%", p + 1)) {
      std::size_t q = p + 2;
      char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q++] : 0;
      q = skip_space(q);
      if (src_.substr(q, 6) != "endraw") continue;
      std::size_t end = match_tag_end(skip_space(q + 6), "%}", true);
      if (end == 0) continue;
      std::string_view text = strip_before(src_.substr(pos_, p - pos_), sign, true);
      if (!text.empty()) push(token_type::data, std::string(text), pos_);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    throw syntax_error("Missing end of raw directive", begin_offset);
  }

  void lex_comment(std::size_t begin_offset) {
    for (std::size_t p = pos_; p + 1 < src_.size(); ++p) {
      std::size_t end = 0;
      if (src_[p] == '+' || src_[p] == '-') {
        if (src_.substr(p + 1, 2) == "#}") end = src_[p] == '-' ? skip_space(p + 3) : p + 3;
      } else if (src_.substr(p, 2) == "#}") {
        end = p + 2 < src_.size() && src_[p + 2] == '\n' ? p + 3 : p + 2;
      }
      if (end != 0) {
        line_starting_ = src_[end - 1] == '\n';
        pos_ = end;
        return;
      }
    }
    throw syntax_error("Missing end of comment tag", begin_offset);
  }

  /// Matches "+close", "-close\s*" or "close" (plus "\n" when trim) at p; 0 if none.
  std::size_t match_tag_end(std::size_t p, std::string_view close, bool trim) const {
    if (p < src_.size() && (src_[p] == '+' || src_[p] == '-') && src_.substr(p + 1, close.size()) == close) {
      if (src_[p] == '+' && !trim) return 0;  // "+}}" is not a variable end
      return src_[p] == '-' ? skip_space(p + 1 + close.size()) : p + 1 + close.size();
    }
    if (src_.substr(p, close.size()) == close) {
      std::size_t end = p + close.size();
      if (trim && end < src_.size() && src_[end] == '\n') ++end;
      return end;
    }
    return 0;
  }

  void lex_tag(tag_kind kind, std::size_t begin_offset) {
    bool block = kind == tag_kind::block;
    push(block ? token_type::block_begin : token_type::variable_begin, "", begin_offset);
    std::string_view close = block ? "%}" : "}}";
    balance_.clear();
    while (pos_ < src_.size()) {
      if (balance_.empty()) {
        std::size_t end = match_tag_end(pos_, close, block);
        if (end != 0) {
          push(block ? token_type::block_end : token_type::variable_end, "", pos_);
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      std::size_t ws = skip_space(pos_);
      if (ws != pos_) {
        pos_ = ws;
        continue;
      }
      lex_expression_token();
    }
  }

  void lex_expression_token() {
    literal_match m = match_number(src_, pos_);
    if (m.length == 0) m = match_name(src_, pos_);
    if (m.length == 0) m = match_string(src_, pos_);
    if (m.length != 0) {
      m.tok.offset = pos_;
      tokens_.push_back(std::move(m.tok));
      pos_ += m.length;
      return;
    }
    lex_operator();
  }

  void lex_operator() {
    static constexpr std::array<std::string_view, 6> two = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : two) {
      if (src_.substr(pos_, 2) == op) {
        push(token_type::op, std::string(op), pos_);
        pos_ += 2;
        return;
      }
    }
    static constexpr std::string_view single = "+-/*%~[](){}><=.:|,;";
    char c = src_[pos_];
    if (single.find(c) == std::string_view::npos) {
      char32_t cp = to_code_points(src_.substr(pos_, 4)).front();
      std::string ch;
      append_utf8(ch, cp);
      throw syntax_error(
          "unexpected char " + py_string_repr(ch) + " at " + std::to_string(code_point_count(src_.substr(0, pos_))),
          pos_);
    }
    track_balance(c);
    push(token_type::op, std::string(1, c), pos_);
    ++pos_;
  }

  void track_balance(char c) {
    if (c == '{' || c == '(' || c == '[') {
      balance_.push_back(c == '{' ? '}' : (c == '(' ? ')' : ']'));
    } else if (c == '}' || c == ')' || c == ']') {
      if (balance_.empty()) throw syntax_error(std::string("unexpected '") + c + "'", pos_);
      char expected = balance_.back();
      balance_.pop_back();
      if (expected != c) throw syntax_error(std::string("unexpected '") + c + "', expected '" + expected + "'", pos_);
    }
  }

  std::size_t skip_space(std::size_t p) const {
    while (p < src_.size()) {
      auto lead = static_cast<unsigned char>(src_[p]);
      if (lead < 0x80) {
        if (!is_space(lead)) break;
        ++p;
        continue;
      }
      std::size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
      std::u32string cp = to_code_points(src_.substr(p, len));
      if (cp.size() != 1 || !is_space(cp[0])) break;
      p += len;
    }
    return p;
  }

  static std::string_view rstrip_space(std::string_view text) {
    std::u32string cps = to_code_points(text);
    std::size_t keep = cps.size();
    while (keep > 0 && is_space(cps[keep - 1])) --keep;
    std::size_t bytes = to_utf8(std::u32string_view(cps).substr(0, keep)).size();
    return text.substr(0, bytes);
  }

  static bool all_space(std::string_view text) {
    for (char32_t c : to_code_points(text))
      if (!is_space(c)) return false;
    return true;
  }

  std::string_view src_;
  std::size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<char> balance_;
  std::vector<token> tokens_;
};

}  // namespace

std::string normalize_template_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<token> tokenize(std::string_view source) { return lexer(source).run(); }

std::string describe_token(const token& t) {
  switch (t.type) {
    case token_type::name:
    case token_type::op:
      return t.text;
    case token_type::data:
      return "template data / text";
    case token_type::variable_begin:
      return "begin of print statement";
    case token_type::variable_end:
      return "end of print statement";
    case token_type::block_begin:
      return "begin of statement block";
    case token_type::block_end:
      return "end of statement block";
    case token_type::string:
      return "string";
    case token_type::integer:
      return "integer";
    case token_type::floating:
      return "float";
    case token_type::eof:
      return "end of template";
  }
  return "token";
}

}  // namespace troupe::jinja
