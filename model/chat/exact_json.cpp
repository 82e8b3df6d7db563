#include "model/chat/exact_json.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/error.hpp>
#include <boost/json/value_stack.hpp>
#include <charconv>
#include <string>

namespace troupe {

namespace {

/// Builds a value like boost::json's own parser, except for doubles.
class exact_handler {
 public:
  static constexpr std::size_t max_array_size = -1;
  static constexpr std::size_t max_object_size = -1;
  static constexpr std::size_t max_string_size = -1;
  static constexpr std::size_t max_key_size = -1;

  exact_handler() { stack.reset(); }

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_array_begin(boost::system::error_code&) { return true; }
  bool on_array_end(std::size_t n, boost::system::error_code&) {
    stack.push_array(n);
    return true;
  }
  bool on_object_begin(boost::system::error_code&) { return true; }
  bool on_object_end(std::size_t n, boost::system::error_code&) {
    stack.push_object(n);
    return true;
  }
  bool on_string_part(boost::json::string_view s, std::size_t, boost::system::error_code&) {
    stack.push_chars(s);
    return true;
  }
  bool on_string(boost::json::string_view s, std::size_t, boost::system::error_code&) {
    stack.push_string(s);
    return true;
  }
  bool on_key_part(boost::json::string_view s, std::size_t, boost::system::error_code&) {
    stack.push_chars(s);
    return true;
  }
  bool on_key(boost::json::string_view s, std::size_t, boost::system::error_code&) {
    stack.push_key(s);
    return true;
  }
  bool on_number_part(boost::json::string_view s, boost::system::error_code&) {
    number_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t i, boost::json::string_view, boost::system::error_code&) {
    number_.clear();
    stack.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, boost::json::string_view, boost::system::error_code&) {
    number_.clear();
    stack.push_uint64(u);
    return true;
  }
  bool on_double(double d, boost::json::string_view s, boost::system::error_code&) {
    number_.append(s.data(), s.size());
    double exact = d;
    auto result = std::from_chars(number_.data(), number_.data() + number_.size(), exact);
    // Out-of-range literals keep Boost's value (infinity or zero), like Python's float().
    stack.push_double(result.ec == std::errc() ? exact : d);
    number_.clear();
    return true;
  }
  bool on_bool(bool b, boost::system::error_code&) {
    stack.push_bool(b);
    return true;
  }
  bool on_null(boost::system::error_code&) {
    stack.push_null();
    return true;
  }
  bool on_comment_part(boost::json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(boost::json::string_view, boost::system::error_code&) { return true; }

  boost::json::value_stack stack;

 private:
  std::string number_;
};

}  // namespace

boost::json::value parse_json_exact(std::string_view text, boost::system::error_code& ec, std::size_t max_depth) {
  boost::json::parse_options options;
  options.max_depth = max_depth;
  boost::json::basic_parser<exact_handler> parser(options);
  std::size_t used = parser.write_some(false, text.data(), text.size(), ec);
  if (!ec && used < text.size()) ec = boost::json::error::extra_data;
  if (ec) return nullptr;
  return parser.handler().stack.release();
}

}  // namespace troupe
