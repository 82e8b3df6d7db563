#pragma once
// Methods of Python's str (and markupsafe.Markup) that templates call, and
// the sandboxed str.format. Internal to model/chat.

#include <string>
#include <string_view>

#include "model/chat/value.hpp"

namespace troupe::jinja {

class render_state;

/// True when `name` is a str method this engine implements.
bool is_str_method(std::string_view name);
/// self.name(*args) for a str or Markup `self`.
value call_str_method(render_state& st, const value& self, std::string_view name, call_args& args);
/// format.format(*args, **kwargs) through the sandbox; fields are HTML-escaped
/// when `escape_fields` (Markup.format).
std::string str_format(render_state& st, std::string_view format, const call_args& args, bool escape_fields);

}  // namespace troupe::jinja

namespace troupe::jinja {

/// Markup.striptags(): drops comments and tags, collapses whitespace, unescapes entities.
std::string markup_striptags(std::string_view html);
/// Markup.unescape() for the named entities &amp; &lt; &gt; &quot; &apos; and numeric references.
std::string markup_unescape(std::string_view html);

}  // namespace troupe::jinja
