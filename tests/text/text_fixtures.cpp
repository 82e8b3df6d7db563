#include "tests/text/text_fixtures.hpp"

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace troupe::text::testing {

namespace {

std::vector<token_id> to_ids(const boost::json::value* value) {
  std::vector<token_id> ids;
  if (value == nullptr) return ids;
  for (const auto& id : value->as_array()) ids.push_back(static_cast<token_id>(id.as_int64()));
  return ids;
}

std::string string_or(const boost::json::object& entry, const char* key, const std::string& fallback) {
  const auto* value = entry.if_contains(key);
  return value == nullptr ? fallback : std::string(value->as_string());
}

std::vector<std::string> read_lines(const std::string& path) {
  std::istringstream in(read_text_file(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

std::string fixture_path(const std::string& relative) { return std::string(TROUPE_FIXTURES_DIR) + "/text/" + relative; }

std::string read_text_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot open " + path);
  std::ostringstream contents;
  contents << file.rdbuf();
  return std::move(contents).str();
}

const std::vector<std::string>& test_strings() {
  static const std::vector<std::string> strings = [] {
    std::vector<std::string> result;
    for (const std::string& line : read_lines(fixture_path("strings.jsonl"))) {
      result.emplace_back(boost::json::parse(line).as_string());
    }
    return result;
  }();
  return strings;
}

golden_record parse_record(const boost::json::object& entry, std::string text) {
  golden_record record;
  record.ids = to_ids(entry.if_contains("ids"));
  if (const auto* special = entry.if_contains("special")) {
    record.special_ids = to_ids(special);
  } else {
    record.special_ids = to_ids(entry.if_contains("pre"));
    record.special_ids.insert(record.special_ids.end(), record.ids.begin(), record.ids.end());
    const std::vector<token_id> post = to_ids(entry.if_contains("post"));
    record.special_ids.insert(record.special_ids.end(), post.begin(), post.end());
  }
  record.decoded = string_or(entry, "dec", text);
  record.decoded_skip = string_or(entry, "dec_skip", text);
  record.decoded_plain = string_or(entry, "dec_plain", text);
  record.text = std::move(text);
  return record;
}

const std::vector<golden_record>& golden_records(const std::string& vocabulary) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<golden_record>> cache;
  const std::lock_guard lock(mutex);
  auto& records = cache[vocabulary];
  if (records.empty()) {
    const std::vector<std::string> lines = read_lines(fixture_path(vocabulary + ".jsonl"));
    const auto& strings = test_strings();
    if (lines.size() != strings.size()) throw std::runtime_error(vocabulary + ".jsonl does not match strings.jsonl");
    for (std::size_t i = 0; i < lines.size(); ++i) {
      records.push_back(parse_record(boost::json::parse(lines[i]).as_object(), strings[i]));
    }
  }
  return records;
}

std::shared_ptr<const tokenizer> real_tokenizer(const std::string& vocabulary) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const tokenizer>> cache;
  const std::lock_guard lock(mutex);
  auto& loaded = cache[vocabulary];
  if (!loaded) loaded = tokenizer::load(fixture_path("tokenizers/" + vocabulary));
  return loaded;
}

}  // namespace troupe::text::testing
