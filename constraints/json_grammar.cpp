#include "constraints/json_grammar.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

namespace troupe::constraints {
namespace {

expression_ptr digits(std::size_t min, std::size_t max) { return repeat(byte_set({{'0', '9'}}), min, max); }

}  // namespace

expression_ptr json_builder::whitespace() { return repeat(byte_set({{'\n', '\n'}, {' ', ' '}}), 0, 1); }

expression_ptr json_builder::string_char() {
  auto plain = code_point_set({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}});
  auto hex = byte_set({{'0', '9'}, {'A', 'F'}, {'a', 'f'}});
  auto escape = sequence(
      {literal("\\"),
       choice({byte_set(
                   {{'"', '"'}, {'/', '/'}, {'\\', '\\'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
               sequence({literal("u"), repeat(hex, 4, 4)})})});
  return choice({plain, escape});
}

expression_ptr json_builder::quoted(expression_ptr body) {
  return sequence({literal("\""), std::move(body), literal("\"")});
}

expression_ptr json_builder::any_string() { return quoted(repeat(string_char(), 0, unbounded)); }

expression_ptr json_builder::integer(bool non_negative) {
  auto magnitude = choice({literal("0"), sequence({byte_set({{'1', '9'}}), digits(0, 15)})});
  if (non_negative) return magnitude;
  return sequence({repeat(literal("-"), 0, 1), magnitude});
}

expression_ptr json_builder::number(bool non_negative) {
  auto fraction = repeat(sequence({literal("."), digits(1, 16)}), 0, 1);
  auto exponent = repeat(
      sequence({byte_set({{'E', 'E'}, {'e', 'e'}}), repeat(byte_set({{'+', '+'}, {'-', '-'}}), 0, 1), digits(1, 3)}), 0,
      1);
  return sequence({integer(non_negative), fraction, exponent});
}

expression_ptr json_builder::member(std::string_view key, expression_ptr value) {
  const std::string quoted_key = boost::json::serialize(boost::json::string(key));
  return sequence({literal(quoted_key), literal(":"), whitespace(), std::move(value)});
}

expression_ptr json_builder::object_of(const expression_ptr& value) {
  auto entry = sequence({any_string(), literal(":"), whitespace(), value});
  auto more = repeat(sequence({literal(","), whitespace(), entry}), 0, unbounded);
  auto body = repeat(sequence({entry, more, whitespace()}), 0, 1);
  return sequence({literal("{"), whitespace(), body, literal("}")});
}

expression_ptr json_builder::object_with(std::vector<expression_ptr> items, std::vector<bool> required) {
  auto body = members(sequence({literal(","), whitespace()}), std::move(items), std::move(required));
  return sequence({literal("{"), whitespace(), body, whitespace(), literal("}")});
}

expression_ptr json_builder::array_of(const expression_ptr& item, std::size_t min, std::size_t max) {
  auto later = sequence({literal(","), whitespace(), item});
  auto more = repeat(later, min > 0 ? min - 1 : 0, max == unbounded ? unbounded : max - 1);
  auto body = sequence({item, more, whitespace()});
  auto elements = min > 0 ? body : repeat(body, 0, 1);
  if (max == 0) elements = sequence({});
  return sequence({literal("["), whitespace(), elements, literal("]")});
}

expression_ptr json_builder::any_value() {
  if (value_rule_ != unbounded) return call(value_rule_);
  value_rule_ = rules_.add_rule("json_value");
  const std::size_t array_rule = rules_.add_rule("json_array");
  auto value = call(value_rule_);
  rules_.bodies[array_rule] = array_of(value, 0, unbounded);
  rules_.bodies[value_rule_] = choice(
      {any_object(), call(array_rule), any_string(), number(), literal("true"), literal("false"), literal("null")});
  return value;
}

expression_ptr json_builder::any_object() {
  if (object_rule_ != unbounded) return call(object_rule_);
  object_rule_ = rules_.add_rule("json_object");
  rules_.bodies[object_rule_] = object_of(any_value());
  return call(object_rule_);
}

}  // namespace troupe::constraints
