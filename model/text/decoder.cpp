#include "model/text/decoder.hpp"

#include "base/utf8.hpp"
#include "model/text/byte_level.hpp"

namespace troupe::text {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return -1;
}

std::string single_character(const json_field& node) {
  const std::string text(node.string());
  std::size_t position = 0;
  if (text.empty() || (decode_utf8(text, position), position != text.size())) node.fail("expected one character");
  return text;
}

void byte_level_chain(std::vector<std::string>& tokens) {
  std::string bytes;
  for (const std::string& token : tokens) {
    if (!byte_level_to_bytes(token, bytes)) bytes.append(token);
  }
  tokens.assign(1, utf8_lossy(bytes));
}

void byte_fallback_chain(std::vector<std::string>& tokens) {
  std::vector<std::string> result;
  std::string run;
  std::size_t run_length = 0;
  const auto flush = [&] {
    if (run_length == 0) return;
    if (find_invalid_utf8(run)) {
      for (std::size_t i = 0; i < run_length; ++i) result.emplace_back("\xEF\xBF\xBD");
    } else {
      result.push_back(run);
    }
    run.clear();
    run_length = 0;
  };
  for (std::string& token : tokens) {
    const int value = byte_fallback_value(token);
    if (value >= 0) {
      run.push_back(static_cast<char>(value));
      ++run_length;
      continue;
    }
    flush();
    result.push_back(std::move(token));
  }
  flush();
  tokens = std::move(result);
}

std::string strip_token(const std::string& token, const std::string& content, std::size_t start, std::size_t stop) {
  std::vector<std::pair<std::size_t, std::size_t>> chars;  // byte ranges of the characters
  for (std::size_t position = 0; position < token.size();) {
    const std::size_t begin = position;
    decode_utf8(token, position);
    chars.emplace_back(begin, position);
  }
  const auto is_content = [&](std::size_t i) {
    return token.compare(chars[i].first, chars[i].second - chars[i].first, content) == 0;
  };
  std::size_t start_cut = 0;
  for (std::size_t i = 0; i < start && i < chars.size() && is_content(i); ++i) start_cut = i + 1;
  std::size_t stop_cut = chars.size();
  for (std::size_t i = 0; i < stop && i < chars.size() && is_content(chars.size() - i - 1); ++i) {
    stop_cut = chars.size() - i - 1;
  }
  // HF panics when the cuts cross; nothing is left in that case.
  if (start_cut >= stop_cut) return {};
  return token.substr(chars[start_cut].first, chars[stop_cut - 1].second - chars[start_cut].first);
}

std::string metaspace_token(const std::string& token, const std::string& replacement, bool drop) {
  std::string result;
  result.reserve(token.size());
  std::size_t position = 0;
  while (position < token.size()) {
    if (token.compare(position, replacement.size(), replacement) == 0) {
      if (!drop) result.push_back(' ');
      position += replacement.size();
    } else {
      result.push_back(token[position++]);
    }
  }
  return result;
}

}  // namespace

int byte_fallback_value(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return -1;
  // Rust's u8::from_str_radix accepts a leading '+'.
  if (token[3] == '+') return hex_digit(token[4]);
  const int high = hex_digit(token[3]);
  const int low = hex_digit(token[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

decoder_spec parse_decoder(const json_field& node) {
  const std::string_view type = node.at("type").string();
  decoder_spec spec;
  if (type == "ByteLevel") {
    spec.type = decoder_spec::kind::byte_level;
  } else if (type == "ByteFallback") {
    spec.type = decoder_spec::kind::byte_fallback;
  } else if (type == "Fuse") {
    spec.type = decoder_spec::kind::fuse;
  } else if (type == "Strip") {
    spec.type = decoder_spec::kind::strip;
    spec.text = single_character(node.at("content"));
    spec.strip_start = static_cast<std::size_t>(node.at("start").integer(0, 1 << 20));
    spec.strip_stop = static_cast<std::size_t>(node.at("stop").integer(0, 1 << 20));
  } else if (type == "Replace") {
    spec.type = decoder_spec::kind::replace;
    spec.pattern = std::make_shared<const text_pattern>(make_text_pattern(node.at("pattern")));
    spec.text = node.at("content").string();
  } else if (type == "Metaspace") {
    spec.type = decoder_spec::kind::metaspace;
    spec.text = single_character(node.at("replacement"));
    if (const auto scheme = node.find("prepend_scheme")) {
      spec.metaspace_prepend = scheme->string() != "never";
    } else {
      spec.metaspace_prepend = node.get_bool("add_prefix_space").value_or(true);
    }
  } else if (type == "Sequence") {
    spec.type = decoder_spec::kind::sequence;
    const json_field list = node.at("decoders");
    for (std::size_t i = 0; i < list.array().size(); ++i) spec.children.push_back(parse_decoder(list.at(i)));
  } else {
    node.fail("unsupported decoder type \"" + std::string(type) + "\"");
  }
  return spec;
}

void decode_chain(const decoder_spec& spec, std::vector<std::string>& tokens) {
  switch (spec.type) {
    case decoder_spec::kind::byte_level:
      byte_level_chain(tokens);
      break;
    case decoder_spec::kind::byte_fallback:
      byte_fallback_chain(tokens);
      break;
    case decoder_spec::kind::fuse: {
      std::string joined;
      for (const std::string& token : tokens) joined.append(token);
      tokens.assign(1, std::move(joined));
      break;
    }
    case decoder_spec::kind::strip:
      for (std::string& token : tokens) token = strip_token(token, spec.text, spec.strip_start, spec.strip_stop);
      break;
    case decoder_spec::kind::replace:
      for (std::string& token : tokens) token = spec.pattern->replace_all(token, spec.text);
      break;
    case decoder_spec::kind::metaspace:
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = metaspace_token(tokens[i], spec.text, i == 0 && spec.metaspace_prepend);
      }
      break;
    case decoder_spec::kind::sequence:
      for (const decoder_spec& child : spec.children) decode_chain(child, tokens);
      break;
  }
}

std::string decode_tokens(const decoder_spec* spec, std::vector<std::string> tokens) {
  std::string text;
  if (spec == nullptr) {
    for (std::size_t i = 0; i < tokens.size(); ++i) text.append(i == 0 ? "" : " ").append(tokens[i]);
    return text;
  }
  decode_chain(*spec, tokens);
  for (const std::string& token : tokens) text.append(token);
  return text;
}

}  // namespace troupe::text
