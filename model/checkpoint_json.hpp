#pragma once
// Reading a checkpoint's JSON files (config.json, generation_config.json,
// the shard index, tokenizer_config.json): bounded file reads, parsing, and
// the json_rules that word every failed read as the model loader always
// has, naming the file and the field path, e.g. "config.json: field
// 'rope_scaling.factor' must be a number, got string". The reader itself is
// base/json_field.hpp.

#include <boost/json/value.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_field.hpp"

namespace troupe {

/// Parses `text` as JSON; throws std::runtime_error "<source>: not valid JSON: ..." on failure.
boost::json::value parse_json_text(std::string_view text, std::string_view source);

/// Reads the file at `path` (at most `max_bytes` bytes, else an error) and
/// parses it as JSON; errors name `source` (usually the file's name).
boost::json::value read_json_file(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view source);

/// Reads the whole file at `path` as bytes; errors (missing, too large) name `source`.
std::string read_text_file(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view source);

/// Rules for one checkpoint file that errors call `source` ("config.json"):
/// a null field is not set, integers are never written as floats (HF writes
/// ints as ints), and failures throw std::runtime_error
/// "<source>: field '<path>' <message>".
file_json_rules checkpoint_json_rules(std::string source);

/// Field `key` of `object` holding one integer or a list of integers (HF's
/// eos_token_id); empty when not set.
std::vector<std::int64_t> get_int_or_int_list(const json_field& object, std::string_view key);

/// Field `key` of `object` holding a list of strings; empty when not set.
std::vector<std::string> get_string_list(const json_field& object, std::string_view key);

}  // namespace troupe
