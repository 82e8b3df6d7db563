// getattr on builtin values: the methods of str, list, tuple, dict, int and
// float, with the ImmutableSandboxedEnvironment's ban on mutating ones.

#include <algorithm>
#include <array>
#include <cstdlib>

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/methods.hpp"
#include "model/chat/objects.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/str_ops.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

constexpr std::array<std::string_view, 5> unsafe_dict = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::array<std::string_view, 8> unsafe_list = {"append", "clear", "pop",    "reverse",
                                                         "insert", "sort",  "extend", "remove"};

template <std::size_t N>
bool among(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

value dict_method(const value& self, std::string_view name, call_args& args) {
  const dict_data& d = self.as_dict();
  if (name == "get") {
    bound_args a(args, "get", {"key", "default"});
    if (!a.has(0)) throw script_error("TypeError", "get expected at least 1 argument, got 0");
    require_hashable(*a.get(0));
    const value* found = d.find(*a.get(0));
    return found ? *found : a.get_or(1, value::none());
  }
  if (name == "copy") return self;
  if (name == "fromkeys") {
    bound_args a(args, "fromkeys", {"iterable", "value"});
    std::vector<std::pair<value, value>> entries;
    for (value& k : py_iterate(a.get_or(0, value::none())))
      entries.emplace_back(std::move(k), a.get_or(1, value::none()));
    return value::dict(std::move(entries));
  }
  bound_args none(args, name, {});
  auto data = std::make_shared<sequence_data>();
  data->flavor = name == "keys"     ? sequence_flavor::dict_keys
                 : name == "values" ? sequence_flavor::dict_values
                                    : sequence_flavor::dict_items;
  for (const auto& [k, v] : d.entries) {
    if (name == "keys")
      data->items.push_back(k);
    else if (name == "values")
      data->items.push_back(v);
    else
      data->items.push_back(value::tuple({k, v}));
  }
  data->depth = self.depth() + 1;
  return value::sequence(std::move(data));
}

value sequence_method(const value& self, std::string_view name, call_args& args) {
  const std::vector<value>& items = self.items();
  if (name == "copy") return value::list(items);
  if (name == "count") {
    bound_args a(args, "count", {"value"});
    value needle = a.get_or(0, value::none());
    return value::integer(
        std::count_if(items.begin(), items.end(), [&](const value& v) { return py_equal(v, needle); }));
  }
  bound_args a(args, "index", {"value", "start", "stop"});
  value needle = a.get_or(0, value::none());
  auto n = static_cast<std::int64_t>(items.size());
  auto clamp = [n](std::int64_t i) { return i < 0 ? std::max<std::int64_t>(i + n, 0) : std::min(i, n); };
  std::int64_t start = a.has(1) ? clamp(require_index(*a.get(1), "slice")) : 0;
  std::int64_t stop = a.has(2) ? clamp(require_index(*a.get(2), "slice")) : n;
  for (std::int64_t i = start; i < stop; ++i)
    if (py_equal(items[static_cast<std::size_t>(i)], needle)) return value::integer(i);
  throw script_error("ValueError", py_repr(needle) + " is not in " + python_type_name(self));
}

value number_method(const value& self, std::string_view name, call_args& args) {
  bound_args none(args, name, {});
  if (name == "conjugate") return self.is_float() ? self : value::integer(self.as_integral());
  if (name == "is_integer") return value::boolean(std::floor(self.as_float()) == self.as_float());
  std::uint64_t m = static_cast<std::uint64_t>(std::llabs(self.as_integral()));
  if (name == "bit_count") return value::integer(__builtin_popcountll(m));
  std::int64_t bits = 0;
  while (m != 0) {
    ++bits;
    m >>= 1;
  }
  return value::integer(bits);
}

value bind(const value& receiver, std::string_view name, value (*fn)(const value&, std::string_view, call_args&)) {
  std::string n(name);
  return make_function(n, "builtin_function_or_method",
                       [receiver, n, fn](render_state&, call_args& args) { return fn(receiver, n, args); });
}

value markup_extra(const value& self, std::string_view name, call_args& args) {
  bound_args none(args, name, {});
  if (name == "striptags") return value::string(markup_striptags(self.as_string()));
  if (name == "unescape") return value::string(markup_unescape(self.as_string()));
  return self;  // escape() of a Markup is itself
}

}  // namespace

method_lookup find_method(const value& receiver, std::string_view name, value& method) {
  if (receiver.is_string()) {
    if (receiver.is_markup() && (name == "striptags" || name == "unescape" || name == "escape")) {
      method = bind(receiver, name, markup_extra);
      return method_lookup::found;
    }
    if (!is_str_method(name)) return method_lookup::missing;
    std::string n(name);
    method = make_function(n, "builtin_function_or_method", [receiver, n](render_state& st, call_args& args) {
      return call_str_method(st, receiver, n, args);
    });
    return method_lookup::found;
  }
  if (receiver.is_dict()) {
    if (among(unsafe_dict, name)) return method_lookup::unsafe;
    if (name != "get" && name != "keys" && name != "values" && name != "items" && name != "copy" && name != "fromkeys")
      return method_lookup::missing;
    method = bind(receiver, name, dict_method);
    return method_lookup::found;
  }
  if (receiver.is_list_or_tuple()) {
    bool list = receiver.flavor() == sequence_flavor::list;
    if (list && among(unsafe_list, name)) return method_lookup::unsafe;
    if (name != "index" && name != "count" && !(list && name == "copy")) return method_lookup::missing;
    method = bind(receiver, name, sequence_method);
    return method_lookup::found;
  }
  bool int_method =
      (receiver.is_int() || receiver.is_bool()) && (name == "bit_length" || name == "bit_count" || name == "conjugate");
  bool float_method = receiver.is_float() && (name == "is_integer" || name == "conjugate");
  if (!int_method && !float_method) return method_lookup::missing;
  method = bind(receiver, name, number_method);
  return method_lookup::found;
}

std::string markup_unescape(std::string_view html) {
  std::string out;
  for (std::size_t i = 0; i < html.size(); ++i) {
    if (html[i] != '&') {
      out.push_back(html[i]);
      continue;
    }
    std::size_t semi = html.find(';', i);
    std::string_view entity = semi == std::string_view::npos ? std::string_view() : html.substr(i + 1, semi - i - 1);
    static const std::pair<std::string_view, std::string_view> named[] = {
        {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", "\u00a0"}};
    bool done = false;
    for (const auto& [k, v] : named) {
      if (entity == k) {
        out += v;
        done = true;
      }
    }
    if (!done && entity.size() > 1 && entity[0] == '#') {
      bool hex = entity[1] == 'x' || entity[1] == 'X';
      std::string digits(entity.substr(hex ? 2 : 1));
      char* end = nullptr;
      unsigned long cp = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
      if (!digits.empty() && end != nullptr && *end == '\0' && cp > 0 && cp <= 0x10FFFF &&
          !(cp >= 0xD800 && cp <= 0xDFFF)) {
        append_utf8(out, static_cast<char32_t>(cp));
        done = true;
      }
    }
    if (done) {
      i = semi;
    } else {
      out.push_back('&');
    }
  }
  return out;
}

std::string markup_striptags(std::string_view html) {
  std::string text(html);
  for (std::size_t start; (start = text.find("<!--")) != std::string::npos;) {
    std::size_t end = text.find("-->", start);
    if (end == std::string::npos) break;
    text.erase(start, end + 3 - start);
  }
  for (std::size_t start; (start = text.find('<')) != std::string::npos;) {
    std::size_t end = text.find('>', start);
    if (end == std::string::npos) break;
    text.erase(start, end + 1 - start);
  }
  std::string collapsed;
  for (const std::string& word : py_split(text, std::nullopt, -1, false)) {
    if (!collapsed.empty()) collapsed.push_back(' ');
    collapsed += word;
  }
  return markup_unescape(collapsed);
}

}  // namespace troupe::jinja
