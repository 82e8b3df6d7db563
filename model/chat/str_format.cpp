// str.format as jinja2's SandboxedFormatter runs it: field lookups go
// through the sandbox's getattr/getitem.

#include "model/chat/errors.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/methods.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

class formatter {
 public:
  formatter(render_state& st, const call_args& args, bool escape) : st_(st), args_(args), escape_(escape) {}

  std::string run(std::string_view fmt, int depth) {
    if (depth > 2) throw script_error("ValueError", "Max string recursion exceeded");
    std::string out;
    std::size_t i = 0;
    while (i < fmt.size()) {
      char c = fmt[i];
      if (c == '}') {
        if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
          out.push_back('}');
          i += 2;
          continue;
        }
        throw script_error("ValueError", "Single '}' encountered in format string");
      }
      if (c != '{') {
        out.push_back(c);
        ++i;
        continue;
      }
      if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
        out.push_back('{');
        i += 2;
        continue;
      }
      std::size_t close = matching_brace(fmt, i);
      out += field(fmt.substr(i + 1, close - i - 1), depth);
      st_.check_string_size(out.size());
      i = close + 1;
    }
    return out;
  }

 private:
  /// A field number or [index] of digits only, as CPython's get_integer reads it.
  static std::int64_t field_index(std::string_view digits) {
    std::size_t i = 0;
    std::optional<std::int64_t> n = read_decimal(digits, i);
    if (!n) throw script_error("ValueError", "Too many decimal digits in format string");
    return *n;
  }

  static std::size_t matching_brace(std::string_view fmt, std::size_t open) {
    int level = 0;
    for (std::size_t j = open; j < fmt.size(); ++j) {
      if (fmt[j] == '{') ++level;
      if (fmt[j] == '}' && --level == 0) return j;
    }
    throw script_error("ValueError", "expected '}' before end of string");
  }

  std::string field(std::string_view body, int depth) {
    std::size_t name_end = body.find_first_of("!:");
    std::string_view name = body.substr(0, name_end);
    char conversion = 0;
    std::size_t spec_start = std::min(name_end, body.size());
    if (name_end != std::string_view::npos && body[name_end] == '!') {
      if (name_end + 1 >= body.size())
        throw script_error("ValueError", "end of string while looking for conversion specifier");
      conversion = body[name_end + 1];
      spec_start = name_end + 2;
      if (spec_start < body.size() && body[spec_start] != ':')
        throw script_error("ValueError", "expected ':' after conversion specifier");
    }
    // string.Formatter's order: the field's object (taking its automatic
    // number first), its conversion, then the nested fields of its spec.
    value v = resolve(name);
    value converted = v;
    if (conversion == 'r' || conversion == 'a') {
      converted = value::string(py_repr(v));
    } else if (conversion == 's') {
      converted = value::string(py_str(v));
    } else if (conversion != 0) {
      throw script_error("ValueError", std::string("Unknown conversion specifier ") + conversion);
    }
    std::string spec = spec_start < body.size() ? run(body.substr(spec_start + 1), depth + 1) : std::string();
    std::string text = format_with_spec(converted, spec, st_.options().limits.max_output_bytes);
    if (escape_ && !(v.is_markup() && conversion == 0)) return html_escape(text);
    return text;
  }

  value resolve(std::string_view name) {
    std::size_t end = name.find_first_of(".[");
    std::string_view first = name.substr(0, end);
    value obj = argument(first);
    std::size_t i = end;
    while (i != std::string_view::npos && i < name.size()) {
      if (name[i] == '.') {
        std::size_t next = name.find_first_of(".[", i + 1);
        std::string_view attr =
            name.substr(i + 1, next == std::string_view::npos ? std::string_view::npos : next - i - 1);
        if (attr.empty()) throw script_error("ValueError", "Empty attribute in format string");
        obj = st_.getattr(obj, attr);
        i = next;
      } else {
        std::size_t close = name.find(']', i);
        if (close == std::string_view::npos) throw script_error("ValueError", "Missing ']' in format string");
        std::string key(name.substr(i + 1, close - i - 1));
        bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        obj = st_.getitem(obj, digits ? value::integer(field_index(key)) : value::string(key));
        i = close + 1;
      }
    }
    return obj;
  }

  value argument(std::string_view first) {
    if (first.empty()) {
      if (manual_)
        throw script_error("ValueError", "cannot switch from manual field specification to automatic field numbering");
      automatic_ = true;
      return positional(next_index_++);
    }
    if (first.find_first_not_of("0123456789") == std::string_view::npos) {
      if (automatic_)
        throw script_error("ValueError", "cannot switch from automatic field numbering to manual field specification");
      manual_ = true;
      return positional(static_cast<std::size_t>(field_index(first)));
    }
    for (const auto& [k, v] : args_.keywords)
      if (k == first) return v;
    throw script_error("KeyError", py_string_repr(first));
  }

  value positional(std::size_t index) {
    if (index >= args_.positional.size()) throw script_error("IndexError", "tuple index out of range");
    return args_.positional[index];
  }

  render_state& st_;
  const call_args& args_;
  bool escape_;
  bool automatic_ = false, manual_ = false;
  std::size_t next_index_ = 0;
};

}  // namespace

std::string str_format(render_state& st, std::string_view format, const call_args& args, bool escape_fields) {
  std::string out = formatter(st, args, escape_fields).run(format, 0);
  st.check_string_size(out.size());
  return out;
}

}  // namespace troupe::jinja
