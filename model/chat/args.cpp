// Python-style binding of call arguments for builtin filters and methods.

#include <algorithm>

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/value.hpp"

namespace troupe::jinja {

bound_args::bound_args(call_args& args, std::string_view function, std::initializer_list<std::string_view> names)
    : values_(names.size()) {
  std::vector<std::string_view> params(names);
  if (args.positional.size() > params.size())
    throw script_error("TypeError", std::string(function) + "() takes at most " + std::to_string(params.size()) +
                                        " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  for (std::size_t i = 0; i < args.positional.size(); ++i) values_[i] = std::move(args.positional[i]);
  for (auto& [name, v] : args.keywords) {
    auto it = std::find(params.begin(), params.end(), name);
    if (it == params.end())
      throw script_error("TypeError", std::string(function) + "() got an unexpected keyword argument '" + name + "'");
    auto index = static_cast<std::size_t>(it - params.begin());
    if (values_[index])
      throw script_error("TypeError", std::string(function) + "() got multiple values for argument '" + name + "'");
    values_[index] = std::move(v);
  }
}

const value* bound_args::get(std::size_t index) const {
  return index < values_.size() && values_[index] ? &*values_[index] : nullptr;
}

value bound_args::get_or(std::size_t index, value fallback) const {
  const value* v = get(index);
  return v ? *v : std::move(fallback);
}

bool flag(const bound_args& args, std::size_t index, bool fallback) {
  const value* v = args.get(index);
  return v ? truthy(*v) : fallback;
}

}  // namespace troupe::jinja
