// Global functions of transformers' template environment.

#include <ctime>
#include <unordered_map>

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/objects.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/py_format.hpp"

namespace troupe::jinja {

namespace {

/// jinja2.sandbox.MAX_RANGE.
constexpr std::int64_t max_range = 100000;

std::int64_t range_arg(const value& v) {
  if (v.is_int() || v.is_bool()) return v.as_integral();
  throw script_error("TypeError", "'" + python_type_name(v) + "' object cannot be interpreted as an integer");
}

value safe_range(render_state&, call_args& args) {
  if (!args.keywords.empty()) throw script_error("TypeError", "range() takes no keyword arguments");
  std::size_t n = args.positional.size();
  if (n == 0 || n > 3)
    throw script_error("TypeError",
                       "range expected " + std::string(n == 0 ? "at least 1 argument, got 0"
                                                              : "at most 3 arguments, got " + std::to_string(n)));
  std::int64_t start = n == 1 ? 0 : range_arg(args.positional[0]);
  std::int64_t stop = range_arg(args.positional[n == 1 ? 0 : 1]);
  std::int64_t step = n == 3 ? range_arg(args.positional[2]) : 1;
  if (step == 0) throw script_error("ValueError", "range() arg 3 must not be zero");
  long double span = step > 0 ? (static_cast<long double>(stop) - start) : (static_cast<long double>(start) - stop);
  long double length =
      span <= 0 ? 0
                : (span + (std::abs(static_cast<long double>(step)) - 1)) / std::abs(static_cast<long double>(step));
  if (length > max_range)
    throw script_error("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  auto data = std::make_shared<sequence_data>();
  data->flavor = sequence_flavor::range;
  data->range_start = start;
  data->range_stop = stop;
  data->range_step = step;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) data->items.push_back(value::integer(i));
  return value::sequence(std::move(data));
}

/// dict(*args, **kwargs) as transformers' TemplateDict builds it.
std::vector<std::pair<value, value>> dict_entries(call_args& args, std::string_view who) {
  if (args.positional.size() > 1)
    throw script_error(
        "TypeError", std::string(who) + " expected at most 1 argument, got " + std::to_string(args.positional.size()));
  std::vector<std::pair<value, value>> entries;
  auto put = [&](value k, value v) {
    require_hashable(k);
    for (auto& e : entries) {
      if (py_equal(e.first, k)) {
        e.second = std::move(v);
        return;
      }
    }
    entries.emplace_back(std::move(k), std::move(v));
  };
  if (!args.positional.empty()) {
    const value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [k, v] : source.as_dict().entries) put(k, v);
    } else {
      std::vector<value> items = py_iterate(source);
      for (std::size_t i = 0; i < items.size(); ++i) {
        std::vector<value> pair =
            items[i].is_string() || items[i].is_sequence() ? py_iterate(items[i]) : std::vector<value>{};
        if (pair.size() != 2)
          throw script_error("ValueError", "dictionary update sequence element #" + std::to_string(i) + " has length " +
                                               std::to_string(pair.size()) + "; 2 is required");
        put(pair[0], pair[1]);
      }
    }
  }
  for (auto& [k, v] : args.keywords) put(value::string(k), v);
  return entries;
}

value make_namespace(render_state& st, call_args& args) {
  // Allocated apart from its control block so an expired registry entry holds no object memory.
  std::shared_ptr<namespace_object> ns(new namespace_object());
  for (auto& [k, v] : dict_entries(args, "namespace")) {
    if (!k.is_string()) throw script_error("TypeError", "namespace attribute names must be strings");
    ns->set(k.as_string(), v);
  }
  st.track_mutable(ns);
  return value::from_object(ns);
}

value raise_exception(render_state&, call_args& args) {
  bound_args a(args, "raise_exception", {"message"});
  throw script_error("TemplateError", a.has(0) ? py_str(*a.get(0)) : "None");
}

value strftime_now(render_state& st, call_args& args) {
  bound_args a(args, "strftime_now", {"format"});
  if (!a.has(0) || !a.get(0)->is_string())
    throw script_error("TypeError",
                       "strftime() argument 1 must be str, not " + python_type_name(a.get_or(0, value::none())));
  // Python handles %f, %z and %Z itself (naive datetime: microseconds 0, no zone).
  std::string format;
  const std::string& f = a.get(0)->as_string();
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '%' && i + 1 < f.size() && (f[i + 1] == 'f' || f[i + 1] == 'z' || f[i + 1] == 'Z')) {
      if (f[i + 1] == 'f') format += "000000";
      ++i;
    } else {
      format.push_back(f[i]);
      if (f[i] == '%' && i + 1 < f.size()) format.push_back(f[++i]);
    }
  }
  std::tm now = st.now();
  std::string out(format.size() * 8 + 64, '\0');
  std::size_t n = format.empty() ? 0 : std::strftime(out.data(), out.size(), format.c_str(), &now);
  if (n == 0 && !format.empty()) throw script_error("ValueError", "strftime format produced no output or is too long");
  out.resize(n);
  return value::string(std::move(out));
}

const std::unordered_map<std::string_view, value>& globals() {
  static const std::unordered_map<std::string_view, value> table = {
      {"range", make_function("safe_range", "function", safe_range)},
      {"dict", make_function("dict", "TemplateDict",
                             [](render_state&, call_args& a) { return value::dict(dict_entries(a, "dict")); })},
      {"namespace", make_function("namespace", "type", make_namespace)},
      {"cycler", make_function("cycler", "type",
                               [](render_state&, call_args& a) {
                                 if (a.positional.empty())
                                   throw script_error("RuntimeError", "at least one item has to be provided");
                                 return value::from_object(std::make_shared<cycler_object>(std::move(a.positional)));
                               })},
      {"joiner", make_function("joiner", "type",
                               [](render_state&, call_args& a) {
                                 bound_args b(a, "joiner", {"sep"});
                                 value sep = b.get_or(0, value::string(", "));
                                 return value::from_object(std::make_shared<joiner_object>(py_str(sep)));
                               })},
      {"raise_exception", make_function("raise_exception", "function", raise_exception)},
      {"strftime_now", make_function("strftime_now", "function", strftime_now)},
  };
  return table;
}

}  // namespace

std::optional<value> find_global(std::string_view name) {
  auto it = globals().find(name);
  if (it == globals().end()) return std::nullopt;
  return it->second;
}

}  // namespace troupe::jinja
