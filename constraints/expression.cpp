#include "constraints/expression.hpp"

#include <algorithm>

#include "base/utf8.hpp"

namespace troupe::constraints {
namespace {

expression_ptr make(expression node) { return std::make_shared<const expression>(std::move(node)); }

expression_ptr with_items(expression::kind type, std::vector<expression_ptr> items) {
  expression node;
  node.type = type;
  node.items = std::move(items);
  return make(std::move(node));
}

/// Appends the byte-range sequences that encode [lo, hi], where both ends
/// have the same UTF-8 length and differ only in bytes a single range per
/// position can describe.
void encode_aligned(char32_t lo, char32_t hi, std::vector<expression_ptr>& out) {
  std::string first;
  std::string last;
  append_utf8(first, lo);
  append_utf8(last, hi);
  std::vector<expression_ptr> parts;
  for (std::size_t i = 0; i < first.size(); ++i) {
    parts.push_back(byte_set({{static_cast<std::uint8_t>(first[i]), static_cast<std::uint8_t>(last[i])}}));
  }
  out.push_back(parts.size() == 1 ? parts[0] : sequence(std::move(parts)));
}

/// Splits [lo, hi] until each piece has aligned UTF-8 encodings.
void encode_range(char32_t lo, char32_t hi, std::vector<expression_ptr>& out) {
  if (lo > hi) return;
  for (char32_t boundary : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= boundary && hi > boundary) {
      encode_range(lo, boundary, out);
      encode_range(boundary + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back(byte_set({{static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(hi)}}));
    return;
  }
  for (int i = 1; i < 4; ++i) {
    const char32_t mask = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~mask) == (hi & ~mask)) continue;
    if ((lo & mask) != 0) {
      encode_range(lo, lo | mask, out);
      encode_range((lo | mask) + 1, hi, out);
      return;
    }
    if ((hi & mask) != mask) {
      encode_range(lo, (hi & ~mask) - 1, out);
      encode_range(hi & ~mask, hi, out);
      return;
    }
  }
  encode_aligned(lo, hi, out);
}

}  // namespace

std::size_t rule_set::add_rule(std::string name) {
  bodies.push_back(nullptr);
  names.push_back(std::move(name));
  return bodies.size() - 1;
}

expression_ptr literal(std::string_view text) {
  std::vector<expression_ptr> items;
  for (unsigned char c : text) items.push_back(byte_set({{c, c}}));
  if (items.size() == 1) return items[0];
  return sequence(std::move(items));
}

expression_ptr byte_set(std::vector<byte_range> ranges) {
  expression node;
  node.type = expression::kind::byte_set;
  node.ranges = std::move(ranges);
  return make(std::move(node));
}

expression_ptr code_point_set(const std::vector<code_point_range>& ranges) {
  std::vector<expression_ptr> alternatives;
  for (auto range : ranges) {
    const char32_t hi = std::min<char32_t>(range.hi, 0x10FFFF);
    if (range.lo <= 0xD7FF || hi >= 0xE000) {
      if (range.lo < 0xD800) encode_range(range.lo, std::min<char32_t>(hi, 0xD7FF), alternatives);
      if (hi > 0xDFFF) encode_range(std::max<char32_t>(range.lo, 0xE000), hi, alternatives);
    }
  }
  if (alternatives.size() == 1) return alternatives[0];
  return choice(std::move(alternatives));
}

expression_ptr sequence(std::vector<expression_ptr> items) {
  return with_items(expression::kind::sequence, std::move(items));
}

expression_ptr choice(std::vector<expression_ptr> items) {
  return with_items(expression::kind::choice, std::move(items));
}

expression_ptr repeat(expression_ptr item, std::size_t min, std::size_t max) {
  expression node;
  node.type = expression::kind::repeat;
  node.items = {std::move(item)};
  node.min = min;
  node.max = max;
  return make(std::move(node));
}

expression_ptr call(std::size_t rule) {
  expression node;
  node.type = expression::kind::call;
  node.rule = rule;
  return make(std::move(node));
}

expression_ptr members(expression_ptr separator, std::vector<expression_ptr> items, std::vector<bool> required) {
  expression node;
  node.type = expression::kind::members;
  node.items.push_back(std::move(separator));
  for (auto& item : items) node.items.push_back(std::move(item));
  node.required = std::move(required);
  return make(std::move(node));
}

std::vector<code_point_range> complement(std::vector<code_point_range> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](auto a, auto b) { return a.lo < b.lo; });
  std::vector<code_point_range> out;
  char32_t next = 0;
  for (auto range : ranges) {
    if (range.lo > next) out.push_back({next, range.lo - 1});
    next = std::max<char32_t>(next, range.hi + 1);
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

}  // namespace troupe::constraints
