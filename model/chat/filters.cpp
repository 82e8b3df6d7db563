// jinja2's filters on single values (strings, numbers), plus transformers'
// tojson; the sequence filters are in filters_seq.cpp.

#include <cmath>
#include <unordered_map>

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/filters_impl.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/json_bridge.hpp"
#include "model/chat/methods.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/str_ops.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

/// jinja2's soft_str: Markup stays Markup, everything else becomes str().
value soft_str(const value& v) { return v.is_string() ? v : value::string(py_str(v)); }

value same_kind(const value& source, std::string text) { return value::string(std::move(text), source.is_markup()); }

value f_default(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_default", {"default_value", "boolean"});
  if (v.is_undefined() || (flag(a, 1, false) && !truthy(v))) return a.get_or(0, value::string(""));
  return v;
}

value f_trim(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_trim", {"chars"});
  std::optional<std::string> chars;
  if (a.has(0) && !a.get(0)->is_none()) chars = py_str(*a.get(0));
  value s = soft_str(v);
  return same_kind(s, py_strip(s.as_string(), chars, true, true));
}

value f_case(const value& v, call_args& args, std::string_view name, std::string (*op)(std::string_view)) {
  bound_args a(args, name, {});
  value s = soft_str(v);
  return same_kind(s, op(s.as_string()));
}

/// jinja2's title filter: upper-cases the first character after - ( { [ < or whitespace.
std::string jinja_title(std::string_view text) {
  std::u32string s = to_code_points(text);
  std::string out;
  auto is_boundary = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c); };
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = i;
    bool boundary = is_boundary(s[i]);
    while (j < s.size() && is_boundary(s[j]) == boundary) ++j;
    std::u32string_view item = std::u32string_view(s).substr(i, j - i);
    if (boundary) {
      out += to_utf8(item);
    } else {
      out += py_upper(to_utf8(item.substr(0, 1)));
      out += py_lower(to_utf8(item.substr(1)));
    }
    i = j;
  }
  return out;
}

value f_replace(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_replace", {"old", "new", "count"});
  std::int64_t count = a.has(2) && !a.get(2)->is_none() ? require_index(*a.get(2), "count") : -1;
  return value::string(py_replace(py_str(v), py_str(a.get_or(0, value::none())), py_str(a.get_or(1, value::none())),
                                  count, st.options().limits.max_output_bytes));
}

/// `' ' * width` (empty for a negative width, as in Python), refused past the
/// string limit before it is allocated; `what` names the argument.
std::string repeated_spaces(const render_state& st, std::int64_t width, const std::string& what) {
  std::uint64_t n = width > 0 ? static_cast<std::uint64_t>(width) : 0;
  std::size_t max_bytes = st.options().limits.max_output_bytes;
  if (!fits_in(0, n, 1, max_bytes)) raise_string_limit(what + " " + std::to_string(width), max_bytes);
  return std::string(static_cast<std::size_t>(n), ' ');
}

value f_tojson(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  json_dump_options o;
  o.ensure_ascii = flag(a, 0, false);
  o.max_bytes = st.options().limits.max_output_bytes;
  if (a.has(1) && !a.get(1)->is_none()) {
    const value& indent = *a.get(1);
    o.indent = indent.is_string() ? indent.as_string() : repeated_spaces(st, require_index(indent, "indent"), "indent");
  }
  if (a.has(2) && !a.get(2)->is_none()) {
    std::vector<value> seps = py_iterate(*a.get(2));
    if (seps.size() != 2)
      throw script_error("ValueError", "separators must be an (item_separator, key_separator) pair");
    o.item_separator = py_str(seps[0]);
    o.key_separator = py_str(seps[1]);
  }
  o.sort_keys = flag(a, 3, false);
  std::string text = to_json_text(v, o);
  st.check_string_size(text.size());
  return value::string(std::move(text));
}

value f_indent(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_indent", {"width", "first", "blank"});
  value width = a.get_or(0, value::integer(4));
  std::string indention =
      width.is_string() ? width.as_string() : repeated_spaces(st, require_index(width, "width"), "indent width");
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_string())
    throw script_error("TypeError", "unsupported operand type(s) for +=: '" + python_type_name(v) + "' and 'str'");
  std::vector<std::string> lines = py_splitlines(v.as_string() + "\n", false);
  bool first = flag(a, 1, false), blank = flag(a, 2, false);
  auto indents = [&](std::size_t i) { return i == 0 ? first : blank || !lines[i].empty(); };
  // Sized first: a wide indent times many lines must fail before allocating.
  std::size_t bytes = lines.size() - 1, indented = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    bytes += lines[i].size();
    indented += indents(i) ? 1 : 0;
  }
  std::size_t max_bytes = st.options().limits.max_output_bytes;
  if (!fits_in(bytes, indented, indention.size(), max_bytes))
    raise_string_limit(
        "indenting " + std::to_string(indented) + " lines by " + std::to_string(indention.size()) + " bytes",
        max_bytes);
  std::string rv;
  rv.reserve(bytes + indented * indention.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) rv += '\n';
    if (indents(i)) rv += indention;
    rv += lines[i];
  }
  return same_kind(v, std::move(rv));
}

value f_truncate(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_truncate", {"length", "killwords", "end", "leeway"});
  std::string text = py_str(v);
  std::int64_t length = require_index(a.get_or(0, value::integer(255)), "length");
  std::string end = py_str(a.get_or(2, value::string("...")));
  auto end_len = static_cast<std::int64_t>(code_point_count(end));
  std::int64_t leeway = a.has(3) && !a.get(3)->is_none() ? require_index(*a.get(3), "leeway") : 5;
  if (length < end_len)
    throw script_error("AssertionError",
                       "expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0) throw script_error("AssertionError", "expected leeway >= 0, got " + std::to_string(leeway));
  if (static_cast<std::int64_t>(code_point_count(text)) - leeway <= length) return value::string(text);
  std::string head = py_substring(text, 0, length - end_len);
  if (flag(a, 1, false)) return value::string(head + end);
  return value::string(py_split(head, std::string(" "), 1, true).front() + end);
}

value f_wordcount(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_wordcount", {});
  std::int64_t words = 0;
  bool in_word = false;
  for (char32_t c : to_code_points(py_str(v))) {
    bool w = is_word_char(c);
    if (w && !in_word) ++words;
    in_word = w;
  }
  return value::integer(words);
}

value f_center(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_center", {"width"});
  value s = soft_str(v);
  return same_kind(s, py_justify(s.as_string(), require_index(a.get_or(0, value::integer(80)), "width"), ' ', '^',
                                 st.options().limits.max_output_bytes));
}

value f_format(render_state& st, const value& v, call_args& args) {
  if (!args.positional.empty() && !args.keywords.empty())
    throw script_error("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
  value params;
  if (!args.keywords.empty()) {
    std::vector<std::pair<value, value>> entries;
    for (auto& [k, val] : args.keywords) entries.emplace_back(value::string(k), val);
    params = value::dict(std::move(entries));
  } else {
    params = value::tuple(args.positional);
  }
  return apply_binary(binary_op::mod, soft_str(v), params, st.sizes());
}

value f_escape(render_state&, const value& v, call_args& args) {
  bound_args a(args, "escape", {});
  if (v.is_markup()) return v;
  return value::string(html_escape(py_str(v)), true);
}

value f_abs(render_state&, const value& v, call_args& args) {
  bound_args a(args, "abs", {});
  if (v.is_float()) return value::floating(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_integral() == INT64_MIN) throw script_error("OverflowError", "integer result does not fit in 64 bits");
    return value::integer(std::llabs(v.as_integral()));
  }
  throw script_error("TypeError", "bad operand type for abs(): '" + python_type_name(v) + "'");
}

value f_length(render_state&, const value& v, call_args& args) {
  bound_args a(args, "len", {});
  return value::integer(py_len(v));
}

value f_attr(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_attr", {"name"});
  std::string name = py_str(a.get_or(0, value::none()));
  if (v.is_dict() && !(name == "get" || name == "keys" || name == "values" || name == "items" || name == "copy"))
    return value::undefined_member(v, value::string(name));
  return st.getattr(v, name);
}

const filter_table& filters() {
  static const filter_table table = [] {
    filter_table t = {
        {"default", f_default},
        {"d", f_default},
        {"trim", f_trim},
        {"tojson", f_tojson},
        {"upper", [](render_state&, const value& v, call_args& a) { return f_case(v, a, "do_upper", py_upper); }},
        {"lower", [](render_state&, const value& v, call_args& a) { return f_case(v, a, "do_lower", py_lower); }},
        {"capitalize",
         [](render_state&, const value& v, call_args& a) { return f_case(v, a, "do_capitalize", py_capitalize); }},
        {"title",
         [](render_state&, const value& v, call_args& a) {
           bound_args b(a, "do_title", {});
           return value::string(jinja_title(py_str(v)));
         }},
        {"replace", f_replace},
        {"indent", f_indent},
        {"truncate", f_truncate},
        {"wordcount", f_wordcount},
        {"center", f_center},
        {"format", f_format},
        {"escape", f_escape},
        {"e", f_escape},
        {"abs", f_abs},
        {"length", f_length},
        {"count", f_length},
        {"attr", f_attr},
        {"string",
         [](render_state&, const value& v, call_args& a) {
           bound_args b(a, "soft_str", {});
           return soft_str(v);
         }},
        {"safe",
         [](render_state&, const value& v, call_args& a) {
           bound_args b(a, "do_mark_safe", {});
           return value::string(py_str(v), true);
         }},
        {"forceescape",
         [](render_state&, const value& v, call_args& a) {
           bound_args b(a, "do_forceescape", {});
           return value::string(html_escape(py_str(v)), true);
         }},
        {"striptags",
         [](render_state&, const value& v, call_args& a) {
           bound_args b(a, "do_striptags", {});
           return value::string(markup_striptags(py_str(v)));
         }},
    };
    add_number_filters(t);
    add_sequence_filters(t);
    return t;
  }();
  return table;
}

}  // namespace

filter_function find_filter(std::string_view name) {
  auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}

}  // namespace troupe::jinja
