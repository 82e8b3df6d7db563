// Python str methods (and markupsafe.Markup's variants) for templates.

#include <unordered_map>

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/methods.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/str_ops.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

using method_body = value (*)(render_state&, const value&, call_args&);

std::string need_str(const value& v, std::string_view what) {
  if (!v.is_string()) throw script_error("TypeError", std::string(what) + " must be str, not " + python_type_name(v));
  return v.as_string();
}

/// An argument that Markup methods escape (markupsafe's _simple_escaping_wrapper).
std::string str_arg(const value& self, const value& v, std::string_view what) {
  std::string text = need_str(v, what);
  return self.is_markup() && !v.is_markup() ? html_escape(text) : text;
}

std::optional<std::int64_t> opt_index(const value* v) {
  if (v == nullptr || v->is_none()) return std::nullopt;
  return require_index(*v, "slice");
}

std::optional<std::string> opt_chars(const value& self, const value* v) {
  if (v == nullptr || v->is_none()) return std::nullopt;
  return str_arg(self, *v, "strip arg");
}

value wrap(const value& self, std::string text) { return value::string(std::move(text), self.is_markup()); }

void no_args(call_args& args, std::string_view name) {
  if (!args.positional.empty() || !args.keywords.empty())
    throw script_error("TypeError", std::string(name) + "() takes no arguments (" +
                                        std::to_string(args.positional.size() + args.keywords.size()) + " given)");
}

value strip_method(const value& self, call_args& args, bool left, bool right) {
  bound_args a(args, left && right ? "strip" : left ? "lstrip" : "rstrip", {"chars"});
  return wrap(self, py_strip(self.as_string(), opt_chars(self, a.get(0)), left, right));
}

value split_method(const value& self, call_args& args, bool from_right) {
  bound_args a(args, from_right ? "rsplit" : "split", {"sep", "maxsplit"});
  std::optional<std::string> sep;
  if (a.has(0) && !a.get(0)->is_none()) sep = need_str(*a.get(0), "sep");
  std::int64_t maxsplit = a.has(1) ? require_index(*a.get(1), "maxsplit") : -1;
  std::vector<value> parts;
  for (std::string& p : py_split(self.as_string(), sep, maxsplit, from_right))
    parts.push_back(wrap(self, std::move(p)));
  return value::list(std::move(parts));
}

value affix_method(const value& self, call_args& args, bool prefix) {
  bound_args a(args, prefix ? "startswith" : "endswith", {"prefix", "start", "end"});
  if (!a.has(0))
    throw script_error("TypeError",
                       std::string(prefix ? "startswith" : "endswith") + "() takes at least 1 argument (0 given)");
  std::string window = py_substring(self.as_string(), opt_index(a.get(1)), opt_index(a.get(2)));
  std::vector<value> candidates;
  const value& arg = *a.get(0);
  if (arg.is_string()) {
    candidates.push_back(arg);
  } else if (arg.is_sequence() && arg.flavor() == sequence_flavor::tuple) {
    candidates = arg.items();
  } else {
    throw script_error("TypeError", std::string(prefix ? "startswith" : "endswith") +
                                        " first arg must be str or a tuple of str, not " + python_type_name(arg));
  }
  for (const value& c : candidates) {
    std::string s = need_str(c, "tuple for startswith");
    bool hit = prefix ? window.compare(0, s.size(), s) == 0 && window.size() >= s.size()
                      : window.size() >= s.size() && window.compare(window.size() - s.size(), s.size(), s) == 0;
    if (hit) return value::boolean(true);
  }
  return value::boolean(false);
}

value find_method_impl(const value& self, call_args& args, std::string_view name) {
  bound_args a(args, name, {"sub", "start", "end"});
  if (!a.has(0)) throw script_error("TypeError", std::string(name) + "() takes at least 1 argument (0 given)");
  std::string sub = need_str(*a.get(0), "substring");
  if (name == "count") return value::integer(py_count(self.as_string(), sub, opt_index(a.get(1)), opt_index(a.get(2))));
  bool right = name == "rfind" || name == "rindex";
  std::int64_t at = py_find(self.as_string(), sub, opt_index(a.get(1)), opt_index(a.get(2)), right);
  if (at < 0 && (name == "index" || name == "rindex")) throw script_error("ValueError", "substring not found");
  return value::integer(at);
}

value justify_method(render_state& st, const value& self, call_args& args, std::string_view name) {
  bound_args a(args, name, {"width", "fillchar"});
  std::int64_t width = require_index(a.get_or(0, value::integer(0)), "width");
  char32_t fill = ' ';
  if (a.has(1)) {
    std::u32string f = to_code_points(str_arg(self, *a.get(1), "fillchar"));
    if (f.size() != 1) throw script_error("TypeError", "The fill character must be exactly one character long");
    fill = f[0];
  }
  char how = name == "ljust" ? '<' : name == "rjust" ? '>' : '^';
  return wrap(self, py_justify(self.as_string(), width, fill, how, st.options().limits.max_output_bytes));
}

value partition_method(const value& self, call_args& args, bool right) {
  bound_args a(args, right ? "rpartition" : "partition", {"sep"});
  std::string sep = str_arg(self, a.get_or(0, value::none()), "sep");
  if (sep.empty()) throw script_error("ValueError", "empty separator");
  const std::string& s = self.as_string();
  std::size_t hit = right ? s.rfind(sep) : s.find(sep);
  if (hit == std::string::npos)
    return right ? value::tuple({wrap(self, ""), wrap(self, ""), self})
                 : value::tuple({self, wrap(self, ""), wrap(self, "")});
  return value::tuple({wrap(self, s.substr(0, hit)), wrap(self, sep), wrap(self, s.substr(hit + sep.size()))});
}

value join_method(render_state& st, const value& self, call_args& args) {
  bound_args a(args, "join", {"iterable"});
  std::vector<value> items = py_iterate(a.get_or(0, value::none()));
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string())
      throw script_error("TypeError", "sequence item " + std::to_string(i) + ": expected str instance, " +
                                          python_type_name(items[i]) + " found");
    if (i > 0) out += self.as_string();
    out += self.is_markup() && !items[i].is_markup() ? html_escape(items[i].as_string()) : items[i].as_string();
    st.check_string_size(out.size());
  }
  return wrap(self, std::move(out));
}

value predicate(const value& self, call_args& args, std::string_view name, bool (*test)(std::string_view)) {
  no_args(args, name);
  return value::boolean(test(self.as_string()));
}

value case_method(const value& self, call_args& args, std::string_view name, std::string (*op)(std::string_view)) {
  no_args(args, name);
  return wrap(self, op(self.as_string()));
}

#define TROUPE_PREDICATE(n, f)                                                           \
  {                                                                                      \
    n, [](render_state&, const value& s, call_args& a) { return predicate(s, a, n, f); } \
  }
#define TROUPE_CASE(n, f)                                                                  \
  {                                                                                        \
    n, [](render_state&, const value& s, call_args& a) { return case_method(s, a, n, f); } \
  }

using method_table = std::unordered_map<std::string_view, method_body>;

void add_text_methods(method_table& table);
void add_editing_methods(method_table& table);

const method_table& str_methods() {
  static const method_table table = [] {
    method_table t = {
        TROUPE_CASE("lower", py_lower),
        TROUPE_CASE("upper", py_upper),
        TROUPE_CASE("title", py_title),
        TROUPE_CASE("capitalize", py_capitalize),
        TROUPE_CASE("swapcase", py_swapcase),
        TROUPE_CASE("casefold", py_casefold),
        TROUPE_PREDICATE("isalnum", py_isalnum),
        TROUPE_PREDICATE("isalpha", py_isalpha),
        TROUPE_PREDICATE("isascii", is_ascii),
        TROUPE_PREDICATE("isdecimal", py_isdecimal),
        TROUPE_PREDICATE("isdigit", py_isdigit),
        TROUPE_PREDICATE("isidentifier", py_isidentifier),
        TROUPE_PREDICATE("islower", py_islower),
        TROUPE_PREDICATE("isnumeric", py_isnumeric),
        TROUPE_PREDICATE("isprintable", py_isprintable),
        TROUPE_PREDICATE("isspace", py_isspace),
        TROUPE_PREDICATE("istitle", py_istitle),
        TROUPE_PREDICATE("isupper", py_isupper),
    };
    add_text_methods(t);
    return t;
  }();
  return table;
}

void add_text_methods(method_table& table) {
  table.insert({
      {"strip", [](render_state&, const value& s, call_args& a) { return strip_method(s, a, true, true); }},
      {"lstrip", [](render_state&, const value& s, call_args& a) { return strip_method(s, a, true, false); }},
      {"rstrip", [](render_state&, const value& s, call_args& a) { return strip_method(s, a, false, true); }},
      {"split", [](render_state&, const value& s, call_args& a) { return split_method(s, a, false); }},
      {"rsplit", [](render_state&, const value& s, call_args& a) { return split_method(s, a, true); }},
      {"startswith", [](render_state&, const value& s, call_args& a) { return affix_method(s, a, true); }},
      {"endswith", [](render_state&, const value& s, call_args& a) { return affix_method(s, a, false); }},
      {"find", [](render_state&, const value& s, call_args& a) { return find_method_impl(s, a, "find"); }},
      {"rfind", [](render_state&, const value& s, call_args& a) { return find_method_impl(s, a, "rfind"); }},
      {"index", [](render_state&, const value& s, call_args& a) { return find_method_impl(s, a, "index"); }},
      {"rindex", [](render_state&, const value& s, call_args& a) { return find_method_impl(s, a, "rindex"); }},
      {"count", [](render_state&, const value& s, call_args& a) { return find_method_impl(s, a, "count"); }},
      {"center", [](render_state& st, const value& s, call_args& a) { return justify_method(st, s, a, "center"); }},
      {"ljust", [](render_state& st, const value& s, call_args& a) { return justify_method(st, s, a, "ljust"); }},
      {"rjust", [](render_state& st, const value& s, call_args& a) { return justify_method(st, s, a, "rjust"); }},
      {"partition", [](render_state&, const value& s, call_args& a) { return partition_method(s, a, false); }},
      {"rpartition", [](render_state&, const value& s, call_args& a) { return partition_method(s, a, true); }},
      {"join", join_method},
  });
  add_editing_methods(table);
}

void add_editing_methods(method_table& table) {
  table.insert({
      {"splitlines",
       [](render_state&, const value& s, call_args& a) {
         bound_args b(a, "splitlines", {"keepends"});
         std::vector<value> lines;
         for (std::string& l : py_splitlines(s.as_string(), flag(b, 0, false))) lines.push_back(wrap(s, std::move(l)));
         return value::list(std::move(lines));
       }},
      {"replace",
       [](render_state& st, const value& s, call_args& a) {
         bound_args b(a, "replace", {"old", "new", "count"});
         std::string old_text = str_arg(s, b.get_or(0, value::none()), "replace() argument 1");
         std::string new_text = str_arg(s, b.get_or(1, value::none()), "replace() argument 2");
         std::int64_t count = b.has(2) ? require_index(*b.get(2), "count") : -1;
         return wrap(s, py_replace(s.as_string(), old_text, new_text, count, st.options().limits.max_output_bytes));
       }},
      {"zfill",
       [](render_state& st, const value& s, call_args& a) {
         bound_args b(a, "zfill", {"width"});
         return wrap(s, py_zfill(s.as_string(), require_index(b.get_or(0, value::integer(0)), "width"),
                                 st.options().limits.max_output_bytes));
       }},
      {"expandtabs",
       [](render_state& st, const value& s, call_args& a) {
         bound_args b(a, "expandtabs", {"tabsize"});
         return wrap(s, py_expandtabs(s.as_string(), require_index(b.get_or(0, value::integer(8)), "tabsize"),
                                      st.options().limits.max_output_bytes));
       }},
      {"removeprefix",
       [](render_state&, const value& s, call_args& a) {
         bound_args b(a, "removeprefix", {"prefix"});
         std::string p = str_arg(s, b.get_or(0, value::none()), "removeprefix() argument");
         const std::string& t = s.as_string();
         return wrap(s, t.rfind(p, 0) == 0 ? t.substr(p.size()) : t);
       }},
      {"removesuffix",
       [](render_state&, const value& s, call_args& a) {
         bound_args b(a, "removesuffix", {"suffix"});
         std::string p = str_arg(s, b.get_or(0, value::none()), "removesuffix() argument");
         const std::string& t = s.as_string();
         bool ends = !p.empty() && t.size() >= p.size() && t.compare(t.size() - p.size(), p.size(), p) == 0;
         return wrap(s, ends ? t.substr(0, t.size() - p.size()) : t);
       }},
      {"format", [](render_state& st, const value& s,
                    call_args& a) { return wrap(s, str_format(st, s.as_string(), a, s.is_markup())); }},
      {"format_map",
       [](render_state& st, const value& s, call_args& a) {
         if (!a.keywords.empty()) throw script_error("TypeError", "format_map() takes no keyword arguments");
         if (a.positional.size() != 1 || !a.positional[0].is_dict())
           throw script_error("TypeError", "format_map() takes exactly one argument (" +
                                               std::to_string(a.positional.size()) + " given)");
         call_args mapped;
         for (const auto& [k, v] : a.positional[0].as_dict().entries)
           if (k.is_string()) mapped.keywords.emplace_back(k.as_string(), v);
         return wrap(s, str_format(st, s.as_string(), mapped, s.is_markup()));
       }},
  });
}

#undef TROUPE_PREDICATE
#undef TROUPE_CASE

}  // namespace

bool is_str_method(std::string_view name) { return str_methods().count(name) != 0; }

value call_str_method(render_state& st, const value& self, std::string_view name, call_args& args) {
  auto it = str_methods().find(name);
  if (it == str_methods().end())
    throw script_error("AttributeError", "'str' object has no attribute '" + std::string(name) + "'");
  value result = it->second(st, self, args);
  if (result.is_string()) st.check_string_size(result.as_string().size());
  return result;
}

}  // namespace troupe::jinja
