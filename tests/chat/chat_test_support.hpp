#pragma once
// Shared helpers for the chat-template tests: fixture paths, JSON loading and
// the fixed clock the Python reference renders were made with.

#include <boost/json.hpp>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "model/chat/chat_template.hpp"
#include "model/chat/exact_json.hpp"

namespace troupe::chat_test {

inline std::filesystem::path fixture_dir() { return std::filesystem::path(TROUPE_FIXTURES_DIR) / "chat"; }

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Parses a fixture with correctly rounded floats, as Python's json module reads them.
inline boost::json::value read_json(const std::filesystem::path& path) {
  boost::system::error_code ec;
  boost::json::value v = parse_json_exact(read_text(path), ec);
  if (ec) throw std::runtime_error(path.string() + ": " + ec.message());
  return v;
}

/// The instant make_chat_fixtures.py pins strftime_now() to (conversations.json "fixed_now").
inline std::tm fixed_now() {
  std::string iso(read_json(fixture_dir() / "conversations.json").at("fixed_now").as_string());
  std::tm t{};
  if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour, &t.tm_min,
                  &t.tm_sec) != 6)
    throw std::runtime_error("bad fixed_now " + iso);
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  std::time_t seconds = timegm(&t);
  std::tm normalized{};
  gmtime_r(&seconds, &normalized);
  return normalized;
}

inline chat_render_options fixed_clock_options() {
  chat_render_options options;
  options.now = fixed_now();
  return options;
}

/// The apply_chat_template inputs of one fixture conversation.
inline chat_template_inputs inputs_of(const boost::json::object& conversation,
                                      const boost::json::object& special_tokens) {
  chat_template_inputs in;
  in.messages = conversation.at("messages").as_array();
  if (auto* tools = conversation.if_contains("tools")) in.tools = tools->as_array();
  if (auto* documents = conversation.if_contains("documents")) in.documents = documents->as_array();
  in.add_generation_prompt = conversation.at("add_generation_prompt").as_bool();
  in.special_tokens = special_tokens;
  if (auto* extra = conversation.if_contains("extra")) in.extra = extra->as_object();
  return in;
}

/// Conversations by name, from conversations.json.
inline boost::json::object conversations_by_name() {
  boost::json::object out;
  boost::json::value all = read_json(fixture_dir() / "conversations.json");
  for (const auto& c : all.at("conversations").as_array()) out[c.at("name").as_string()] = c;
  return out;
}

}  // namespace troupe::chat_test
