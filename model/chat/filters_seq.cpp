// jinja2's filters over sequences and mappings. Like jinja2, map, select,
// reject, unique, items, batch and slice return single-pass generators.

#include <algorithm>

#include "model/chat/errors.hpp"
#include "model/chat/filters_impl.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/str_ops.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

value make_generator(std::vector<value> items, std::string type = "generator") {
  auto data = std::make_shared<sequence_data>();
  std::size_t depth = 0;
  for (const value& v : items) depth = std::max(depth, v.depth());
  data->depth = depth + 1;
  data->items = std::move(items);
  data->flavor = sequence_flavor::generator;
  data->iterator_type = std::move(type);
  return value::sequence(std::move(data));
}

/// jinja2's _prepare_attribute_parts: "a.0.b" -> ["a", 0, "b"].
std::vector<value> attribute_parts(const value& attribute) {
  if (attribute.is_none()) return {};
  if (!attribute.is_string()) return {attribute};
  std::vector<value> parts;
  for (std::string& p : py_split(attribute.as_string(), std::string("."), -1, false)) {
    bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      parts.push_back(value::string(std::move(p)));
      continue;
    }
    std::size_t i = 0;
    std::optional<std::int64_t> index = read_decimal(std::string_view(p), i);
    if (!index)
      throw script_error("OverflowError",
                         "integer " + p + " does not fit in 64 bits (the template engine's int range)");
    parts.push_back(value::integer(*index));
  }
  return parts;
}

value ignore_case(const value& v) { return v.is_string() ? value::string(py_lower(v.as_string())) : v; }

/// jinja2's make_attrgetter.
value get_path(render_state& st, value item, const std::vector<value>& parts, const value* fallback, bool lower) {
  for (const value& part : parts) {
    item = st.getitem(item, part);
    if (fallback != nullptr && item.is_undefined()) item = *fallback;
  }
  return lower ? ignore_case(item) : item;
}

/// jinja2's make_multi_attrgetter key for sort(): one value per comma-separated attribute.
value multi_key(render_state& st, const value& item, const value& attribute, bool lower) {
  std::vector<value> keys;
  if (attribute.is_string()) {
    for (std::string& a : py_split(attribute.as_string(), std::string(","), -1, false))
      keys.push_back(get_path(st, item, attribute_parts(value::string(a)), nullptr, lower));
  } else {
    keys.push_back(get_path(st, item, attribute_parts(attribute), nullptr, lower));
  }
  return value::list(std::move(keys));
}

value f_first(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_first", {});
  std::vector<value> items = py_iterate(v);
  return items.empty() ? value::undefined("No first item, sequence was empty.") : items.front();
}

value f_last(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_last", {});
  if (v.is_sequence() && (v.flavor() == sequence_flavor::generator || v.flavor() == sequence_flavor::iterator))
    throw script_error("TypeError", "'" + python_type_name(v) + "' object is not reversible");
  std::vector<value> items = py_iterate(v);
  return items.empty() ? value::undefined("No last item, sequence was empty.") : items.back();
}

value f_join(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_join", {"d", "attribute"});
  std::string sep = py_str(a.get_or(0, value::string("")));
  std::vector<value> parts = a.has(1) ? attribute_parts(*a.get(1)) : std::vector<value>{};
  std::string out;
  bool first = true;
  for (const value& item : py_iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += py_str(a.has(1) ? get_path(st, item, parts, nullptr, false) : item);
    st.check_string_size(out.size());
  }
  return value::string(std::move(out));
}

value f_list(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "list", {});
  std::vector<value> items = py_iterate(v);
  st.check_items(items.size());
  return value::list(std::move(items));
}

value f_items(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_items", {});
  if (v.is_undefined()) return make_generator({});
  if (!v.is_dict()) throw script_error("TypeError", "Can only get item pairs from a mapping.");
  std::vector<value> pairs;
  for (const auto& [k, val] : v.as_dict().entries) pairs.push_back(value::tuple({k, val}));
  return make_generator(std::move(pairs));
}

value f_map(render_state& st, const value& v, call_args& args) {
  if (!truthy(v)) return make_generator({});
  std::vector<value> out;
  std::vector<value> items = py_iterate(v);
  if (args.positional.empty()) {
    value attribute = value::none(), fallback = value::none();
    bool has_attribute = false;
    for (auto& [k, val] : args.keywords) {
      if (k == "attribute") {
        attribute = val;
        has_attribute = true;
      } else if (k == "default") {
        fallback = val;
      } else {
        throw script_error("FilterArgumentError", "Unexpected keyword argument " + py_string_repr(k));
      }
    }
    if (!has_attribute) throw script_error("FilterArgumentError", "map requires a filter argument");
    std::vector<value> parts = attribute_parts(attribute);
    for (const value& item : items)
      out.push_back(get_path(st, item, parts, fallback.is_none() ? nullptr : &fallback, false));
    return make_generator(std::move(out));
  }
  std::string name = py_str(args.positional.front());
  if (find_filter(name) == nullptr)
    throw script_error("TemplateRuntimeError", "No filter named " + py_string_repr(name) + ".");
  for (const value& item : items) {
    call_args rest{{args.positional.begin() + 1, args.positional.end()}, args.keywords};
    out.push_back(st.call_filter(name, item, std::move(rest)));
  }
  return make_generator(std::move(out));
}

/// select, reject, selectattr, rejectattr.
value select_or_reject(render_state& st, const value& v, call_args& args, bool keep_matches, bool lookup_attr) {
  if (!truthy(v)) return make_generator({});
  std::size_t off = 0;
  std::vector<value> parts;
  if (lookup_attr) {
    if (args.positional.empty()) throw script_error("FilterArgumentError", "Missing parameter for attribute name");
    parts = attribute_parts(args.positional.front());
    off = 1;
  }
  std::optional<std::string> test;
  if (args.positional.size() > off) {
    test = py_str(args.positional[off]);
    if (find_test(*test) == nullptr)
      throw script_error("TemplateRuntimeError", "No test named " + py_string_repr(*test) + ".");
  }
  std::vector<value> out;
  for (const value& item : py_iterate(v)) {
    value subject = lookup_attr ? get_path(st, item, parts, nullptr, false) : item;
    bool match = false;
    if (test) {
      call_args rest{{args.positional.begin() + static_cast<std::ptrdiff_t>(off + 1), args.positional.end()},
                     args.keywords};
      match = st.call_test(*test, subject, std::move(rest));
    } else {
      match = truthy(subject);
    }
    if (match == keep_matches) out.push_back(item);
  }
  return make_generator(std::move(out));
}

value f_sort(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_sort", {"reverse", "case_sensitive", "attribute"});
  bool reverse = flag(a, 0, false), lower = !flag(a, 1, false);
  value attribute = a.get_or(2, value::none());
  std::vector<value> items = py_iterate(v);
  std::vector<std::pair<value, value>> keyed;
  for (value& item : items) keyed.emplace_back(multi_key(st, item, attribute, lower), std::move(item));
  st.step(keyed.size());
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
  std::vector<value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return value::list(std::move(out));
}

value f_unique(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_unique", {"case_sensitive", "attribute"});
  bool lower = !flag(a, 0, false);
  std::vector<value> parts = attribute_parts(a.get_or(1, value::none()));
  std::vector<value> seen, out;
  for (const value& item : py_iterate(v)) {
    value key = get_path(st, item, parts, nullptr, lower);
    require_hashable(key);
    st.step(seen.size());
    if (std::none_of(seen.begin(), seen.end(), [&](const value& s) { return py_equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return make_generator(std::move(out));
}

value min_or_max(render_state& st, const value& v, call_args& args, bool want_max) {
  bound_args a(args, want_max ? "do_max" : "do_min", {"case_sensitive", "attribute"});
  bool lower = !flag(a, 0, false);
  std::vector<value> parts = attribute_parts(a.get_or(1, value::none()));
  std::vector<value> items = py_iterate(v);
  if (items.empty()) return value::undefined("No aggregated item, sequence was empty.");
  std::size_t best = 0;
  value best_key = get_path(st, items[0], parts, nullptr, lower);
  for (std::size_t i = 1; i < items.size(); ++i) {
    value key = get_path(st, items[i], parts, nullptr, lower);
    if (want_max ? py_less(best_key, key) : py_less(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

value f_sum(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_sum", {"attribute", "start"});
  value total = a.get_or(1, value::integer(0));
  if (total.is_string()) throw script_error("TypeError", "sum() can't sum strings [use ''.join(seq) instead]");
  std::vector<value> parts = a.has(0) ? attribute_parts(*a.get(0)) : std::vector<value>{};
  for (const value& item : py_iterate(v))
    total =
        apply_binary(binary_op::add, total, a.has(0) ? get_path(st, item, parts, nullptr, false) : item, st.sizes());
  return total;
}

value f_reverse(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_reverse", {});
  if (v.is_string()) {
    std::u32string s = to_code_points(v.as_string());
    std::reverse(s.begin(), s.end());
    return value::string(to_utf8(s), v.is_markup());
  }
  if (!v.is_sequence() && !v.is_dict() && !v.is_undefined())
    throw script_error("FilterArgumentError", "argument must be iterable");
  bool single_pass =
      v.is_sequence() && (v.flavor() == sequence_flavor::generator || v.flavor() == sequence_flavor::iterator);
  std::vector<value> items = py_iterate(v);
  std::reverse(items.begin(), items.end());
  st.check_items(items.size());
  if (single_pass) return value::list(std::move(items));
  std::string type = v.is_dict() ? "dict_reversekeyiterator" : python_type_name(v) + "_reverseiterator";
  return make_generator(std::move(items), std::move(type));
}

value chunks(render_state& st, const value& v, call_args& args, bool batch) {
  bound_args a(args, batch ? "do_batch" : "do_slice", {batch ? "linecount" : "slices", "fill_with"});
  std::int64_t n = require_index(a.get_or(0, value::integer(1)), batch ? "linecount" : "slices");
  const value* fill = a.has(1) && !a.get(1)->is_none() ? a.get(1) : nullptr;
  std::vector<value> items = py_iterate(v);
  std::vector<value> out;
  if (batch) {
    if (n <= 0) throw script_error("ValueError", "batch size must be positive");
    // The last batch is filled up to n items: refuse a fill past the list limit before building it.
    if (fill != nullptr && !items.empty()) st.check_items(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < items.size(); i += static_cast<std::size_t>(n)) {
      std::vector<value> chunk(
          items.begin() + static_cast<std::ptrdiff_t>(i),
          items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + static_cast<std::size_t>(n))));
      while (fill != nullptr && chunk.size() < static_cast<std::size_t>(n)) chunk.push_back(*fill);
      out.push_back(value::list(std::move(chunk)));
    }
    return make_generator(std::move(out));
  }
  if (n <= 0) throw script_error("ZeroDivisionError", "integer division or modulo by zero");
  st.check_items(static_cast<std::size_t>(n));
  std::size_t per = items.size() / static_cast<std::size_t>(n), extra = items.size() % static_cast<std::size_t>(n),
              offset = 0;
  for (std::size_t s = 0; s < static_cast<std::size_t>(n); ++s) {
    std::size_t start = offset + s * per;
    if (s < extra) ++offset;
    std::size_t end = offset + (s + 1) * per;
    std::vector<value> chunk(items.begin() + static_cast<std::ptrdiff_t>(start),
                             items.begin() + static_cast<std::ptrdiff_t>(end));
    if (fill != nullptr && s >= extra) chunk.push_back(*fill);
    out.push_back(value::list(std::move(chunk)));
  }
  return make_generator(std::move(out));
}

value f_dictsort(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_dictsort", {"case_sensitive", "by", "reverse"});
  bool lower = !flag(a, 0, false), reverse = flag(a, 2, false);
  std::string by = py_str(a.get_or(1, value::string("key")));
  if (by != "key" && by != "value")
    throw script_error("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_dict())
    throw script_error("AttributeError", "'" + python_type_name(v) + "' object has no attribute 'items'");
  std::vector<value> pairs;
  for (const auto& [k, val] : v.as_dict().entries) pairs.push_back(value::tuple({k, val}));
  std::size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const value& x, const value& y) {
    value kx = lower ? ignore_case(x.items()[pos]) : x.items()[pos];
    value ky = lower ? ignore_case(y.items()[pos]) : y.items()[pos];
    return reverse ? py_less(ky, kx) : py_less(kx, ky);
  });
  return value::list(std::move(pairs));
}

/// pprint.pformat for values that fit on one line: repr with dict keys sorted.
std::string sorted_repr(const value& v) {
  if (v.is_dict()) {
    std::vector<std::pair<value, value>> entries = v.as_dict().entries;
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& x, const auto& y) { return py_less(x.first, y.first); });
    std::string out = "{";
    for (std::size_t i = 0; i < entries.size(); ++i)
      out += (i > 0 ? ", " : "") + py_repr(entries[i].first) + ": " + sorted_repr(entries[i].second);
    return out + "}";
  }
  if (v.is_list_or_tuple()) {
    bool tuple = v.flavor() == sequence_flavor::tuple;
    std::string out = tuple ? "(" : "[";
    for (std::size_t i = 0; i < v.items().size(); ++i) out += (i > 0 ? ", " : "") + sorted_repr(v.items()[i]);
    if (tuple && v.items().size() == 1) out += ",";
    return out + (tuple ? ")" : "]");
  }
  return py_repr(v);
}

}  // namespace

void add_sequence_filters(filter_table& t) {
  t.emplace("first", f_first);
  t.emplace("last", f_last);
  t.emplace("join", f_join);
  t.emplace("list", f_list);
  t.emplace("items", f_items);
  t.emplace("map", f_map);
  t.emplace("select",
            [](render_state& st, const value& v, call_args& a) { return select_or_reject(st, v, a, true, false); });
  t.emplace("reject",
            [](render_state& st, const value& v, call_args& a) { return select_or_reject(st, v, a, false, false); });
  t.emplace("selectattr",
            [](render_state& st, const value& v, call_args& a) { return select_or_reject(st, v, a, true, true); });
  t.emplace("rejectattr",
            [](render_state& st, const value& v, call_args& a) { return select_or_reject(st, v, a, false, true); });
  t.emplace("sort", f_sort);
  t.emplace("unique", f_unique);
  t.emplace("min", [](render_state& st, const value& v, call_args& a) { return min_or_max(st, v, a, false); });
  t.emplace("max", [](render_state& st, const value& v, call_args& a) { return min_or_max(st, v, a, true); });
  t.emplace("sum", f_sum);
  t.emplace("reverse", f_reverse);
  t.emplace("batch", [](render_state& st, const value& v, call_args& a) { return chunks(st, v, a, true); });
  t.emplace("slice", [](render_state& st, const value& v, call_args& a) { return chunks(st, v, a, false); });
  t.emplace("dictsort", f_dictsort);
  t.emplace("pprint", [](render_state&, const value& v, call_args& a) {
    bound_args b(a, "do_pprint", {});
    return value::string(sorted_repr(v));
  });
}

}  // namespace troupe::jinja
