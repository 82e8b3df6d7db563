#pragma once
// JSON text laid out the way the HF Python tools write their files, so
// generated checkpoints read like the ones transformers saves:
// json.dumps(value, indent=2, sort_keys=..., ensure_ascii=...), floats in
// Python's repr (1e-06, 500000.0).

#include <boost/json/value.hpp>
#include <string>

namespace troupe {

/// Layout choices of Python's json.dumps that HF files differ in.
struct python_json_style {
  bool sort_keys = true;     ///< transformers sorts config keys; tokenizers keeps field order
  bool ensure_ascii = true;  ///< escape non-ASCII as \uXXXX (Python's default)
};

/// `value` as json.dumps(value, indent=2, ...) would print it, without a trailing newline.
std::string to_python_json(const boost::json::value& value, const python_json_style& style = {});

/// Python's repr() of a float: shortest round-trip digits, fixed notation for
/// exponents in [-4, 16) with ".0" on whole numbers, else "1e-06" style.
std::string python_float_repr(double value);

}  // namespace troupe
