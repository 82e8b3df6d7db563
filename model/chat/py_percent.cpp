// printf-style `str % args`, as CPython's PyUnicode_Format does it.

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>

#include "model/chat/errors.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

struct conversion {
  bool left = false, plus = false, space = false, alternate = false, zero = false;
  std::int64_t width = -1;
  std::int64_t precision = -1;
  char32_t type = 0;
  std::size_t max_bytes = 0;  ///< longest text the conversion may build
};

/// Hands out the arguments of one `%` operation in order.
class argument_source {
 public:
  explicit argument_source(const value& args) : args_(args) {
    if (args.is_sequence() && args.flavor() == sequence_flavor::tuple) {
      tuple_ = &args.items();
    } else if (args.is_dict()) {
      mapping_ = &args.as_dict();
    }
  }

  value next() {
    if (tuple_ != nullptr) {
      if (index_ >= tuple_->size()) throw script_error("TypeError", "not enough arguments for format string");
      return (*tuple_)[index_++];
    }
    if (single_used_) throw script_error("TypeError", "not enough arguments for format string");
    single_used_ = true;
    return args_;
  }

  value named(const std::string& key) const {
    if (mapping_ == nullptr) throw script_error("TypeError", "format requires a mapping");
    const value* found = mapping_->find(key);
    if (found == nullptr) throw script_error("KeyError", py_string_repr(key));
    return *found;
  }

  void check_all_used() const {
    bool unused = tuple_ != nullptr ? index_ < tuple_->size() : (!single_used_ && mapping_ == nullptr);
    if (unused) throw script_error("TypeError", "not all arguments converted during string formatting");
  }

 private:
  const value& args_;
  const std::vector<value>* tuple_ = nullptr;
  const dict_data* mapping_ = nullptr;
  std::size_t index_ = 0;
  bool single_used_ = false;
};

std::string pad_conversion(const std::string& sign, const std::string& body, const conversion& c, bool numeric) {
  auto len = static_cast<std::int64_t>(code_point_count(sign) + code_point_count(body));
  if (c.width <= len) return sign + body;
  if (!fits_in(sign.size() + body.size(), static_cast<std::uint64_t>(c.width - len), 1, c.max_bytes))
    raise_string_limit("%-format width " + std::to_string(c.width), c.max_bytes);
  std::string fill(static_cast<std::size_t>(c.width - len), (numeric && c.zero && !c.left) ? '0' : ' ');
  if (c.left) return sign + body + fill;
  if (numeric && c.zero) return sign + fill + body;
  return fill + sign + body;
}

std::string number_sign(bool negative, const conversion& c) {
  if (negative) return "-";
  if (c.plus) return "+";
  if (c.space) return " ";
  return "";
}

std::string format_integer(const value& v, const conversion& c) {
  std::string type_char;
  append_utf8(type_char, c.type);
  bool decimal = c.type == 'd' || c.type == 'i' || c.type == 'u';
  std::int64_t n = 0;
  if (v.is_int() || v.is_bool()) {
    n = v.as_integral();
  } else if (v.is_float() && decimal) {
    const double truncated = std::trunc(v.as_float());
    if (std::isnan(truncated)) throw script_error("ValueError", "cannot convert float NaN to integer");
    // Python's ints are unbounded; ours are 64-bit, so larger values (and
    // infinities) are refused instead of converted out of range.
    if (!(truncated >= -9.223372036854775808e18 && truncated < 9.223372036854775808e18))
      throw script_error("OverflowError", "%" + type_char + " format: the number is too large for a 64-bit integer");
    n = static_cast<std::int64_t>(truncated);
  } else if (decimal) {
    throw script_error("TypeError", "%" + type_char + " format: a real number is required, not " + python_type_name(v));
  } else {
    throw script_error("TypeError", "%" + type_char + " format: an integer is required, not " + python_type_name(v));
  }
  std::uint64_t m = n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
  int base = c.type == 'o' ? 8 : (c.type == 'x' || c.type == 'X') ? 16 : 10;
  const char* digits = c.type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string body;
  do {
    body.insert(body.begin(), digits[m % static_cast<std::uint64_t>(base)]);
    m /= static_cast<std::uint64_t>(base);
  } while (m != 0);
  if (c.precision > static_cast<std::int64_t>(body.size())) {
    if (!fits_in(0, static_cast<std::uint64_t>(c.precision), 1, c.max_bytes))
      raise_string_limit("%-format precision " + std::to_string(c.precision), c.max_bytes);
    body.insert(0, static_cast<std::size_t>(c.precision) - body.size(), '0');
  }
  std::string sign = number_sign(n < 0, c);
  if (c.alternate && base != 10) sign += c.type == 'o' ? "0o" : (c.type == 'X' ? "0X" : "0x");
  return pad_conversion(sign, body, c, true);
}

std::string format_float(const value& v, const conversion& c) {
  if (!v.is_number()) throw script_error("TypeError", "must be real number, not " + python_type_name(v));
  double d = v.as_double();
  std::string body;
  if (std::isinf(d) || std::isnan(d)) {
    body = std::isnan(d) ? "nan" : "inf";
    if (c.type == 'E' || c.type == 'F' || c.type == 'G') body = body == "nan" ? "NAN" : "INF";
  } else {
    std::string pattern = c.alternate ? "%#.*" : "%.*";
    pattern.push_back(static_cast<char>(c.type));
    char buf[512];
    int precision =
        printf_float_precision(static_cast<char>(c.type), c.alternate, c.precision < 0 ? 6 : c.precision, c.max_bytes);
    int n = std::snprintf(buf, sizeof buf, pattern.c_str(), precision, std::fabs(d));
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof buf)
      throw script_error("OverflowError", "formatted float is too long (precision too large?)");
    body.assign(buf, static_cast<std::size_t>(n));
  }
  return pad_conversion(number_sign(std::signbit(d) && !std::isnan(d), c), body, c, true);
}

std::string convert(const value& v, const conversion& c) {
  switch (c.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string text = c.type == 's' ? py_str(v) : py_repr(v);
      if (c.precision >= 0) {
        std::u32string cps = to_code_points(text);
        if (cps.size() > static_cast<std::size_t>(c.precision))
          text = to_utf8(cps.substr(0, static_cast<std::size_t>(c.precision)));
      }
      return pad_conversion("", text, c, false);
    }
    case 'd':
    case 'i':
    case 'u':
    case 'o':
    case 'x':
    case 'X':
      return format_integer(v, c);
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      return format_float(v, c);
    case 'c': {
      std::string out;
      if (v.is_int()) {
        append_utf8(out, static_cast<char32_t>(v.as_int()));
      } else if (v.is_string() && code_point_count(v.as_string()) == 1) {
        out = v.as_string();
      } else {
        throw script_error("TypeError", "%c requires int or char");
      }
      return pad_conversion("", out, c, false);
    }
    default:
      break;
  }
  char buf[96];
  std::string ch;
  append_utf8(ch, c.type);
  std::snprintf(buf, sizeof buf, "unsupported format character '%s' (0x%x)", ch.c_str(), static_cast<unsigned>(c.type));
  throw script_error("ValueError", buf);
}

/// A '*' width or precision: the next argument, which must be an int.
std::int64_t star_argument(argument_source& source) {
  value n = source.next();
  if (!n.is_int()) throw script_error("TypeError", "* wants int");
  return n.as_int();
}

/// Digits of a width or precision, -1 when absent; past `max`, ValueError
/// "<what> too big" as CPython says (Py_ssize_t widths, int precisions).
std::int64_t digits_at(const std::u32string& f, std::size_t& i, std::int64_t max, const char* what) {
  std::optional<std::int64_t> n = read_decimal(std::u32string_view(f), i);
  if (!n || *n > max) throw script_error("ValueError", std::string(what) + " too big");
  return *n;
}

/// Parses "[flags][width][.precision][length]type" starting at f[i].
conversion parse_conversion(const std::u32string& f, std::size_t& i, argument_source& source) {
  conversion c;
  for (; i < f.size(); ++i) {
    if (f[i] == '-')
      c.left = true;
    else if (f[i] == '+')
      c.plus = true;
    else if (f[i] == ' ')
      c.space = true;
    else if (f[i] == '#')
      c.alternate = true;
    else if (f[i] == '0')
      c.zero = true;
    else
      break;
  }
  if (i < f.size() && f[i] == '*') {
    ++i;
    std::int64_t width = star_argument(source);
    // A negative width left-aligns; -INT64_MIN does not fit, and is past any limit anyway.
    c.left = c.left || width < 0;
    c.width = width >= 0 ? width : width == INT64_MIN ? INT64_MAX : -width;
  } else {
    c.width = digits_at(f, i, INT64_MAX, "width");
  }
  if (i < f.size() && f[i] == '.') {
    ++i;
    if (i < f.size() && f[i] == '*') {
      ++i;
      std::int64_t precision = star_argument(source);
      if (precision > INT_MAX || precision < INT_MIN)
        throw script_error("OverflowError", "Python int too large to convert to C int");
      c.precision = std::max<std::int64_t>(precision, 0);
    } else {
      c.precision = std::max<std::int64_t>(digits_at(f, i, INT_MAX, "precision"), 0);
    }
  }
  while (i < f.size() && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L')) ++i;
  if (i >= f.size()) throw script_error("ValueError", "incomplete format");
  c.type = f[i++];
  return c;
}

}  // namespace

std::string percent_format(std::string_view format, const value& args, std::size_t max_bytes) {
  std::u32string f = to_code_points(format);
  argument_source source(args);
  std::string out;
  std::size_t i = 0;
  while (i < f.size()) {
    if (f[i] != '%') {
      append_utf8(out, f[i++]);
      continue;
    }
    ++i;
    if (i >= f.size()) throw script_error("ValueError", "incomplete format");
    if (f[i] == '%') {
      out.push_back('%');
      ++i;
      continue;
    }
    std::optional<value> keyed;
    if (f[i] == '(') {
      std::size_t close = f.find(')', i);
      if (close == std::u32string::npos) throw script_error("ValueError", "incomplete format key");
      keyed = source.named(to_utf8(f.substr(i + 1, close - i - 1)));
      i = close + 1;
    }
    conversion c = parse_conversion(f, i, source);
    c.max_bytes = max_bytes;
    if (c.type == '%') {
      out.push_back('%');
      continue;
    }
    try {
      out += convert(keyed ? *keyed : source.next(), c);
    } catch (const limit_error&) {
      throw;
    } catch (const script_error& e) {
      std::string message = e.what();
      if (message.rfind("unsupported format character", 0) == 0) message += " at index " + std::to_string(i - 1);
      throw script_error(e.python_type(), message);
    }
    if (out.size() > max_bytes) raise_string_limit("%-formatted string", max_bytes);
  }
  source.check_all_used();
  return out;
}

}  // namespace troupe::jinja
