#include "model/gguf_tokenizer.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "base/utf8.hpp"

namespace troupe {

namespace {

// llama.cpp's token types.
enum token_kind : std::int64_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// The split regexes of the HF tokenizer.json each `tokenizer.ggml.pre` stands for.
constexpr std::string_view llama3_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view qwen2_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The tokenizer.ggml.* arrays and ids, checked.
struct gguf_vocab {
  std::string_view model;
  std::vector<std::string_view> tokens;
  std::vector<std::int64_t> types;  ///< normal when the file has no token_type
  std::vector<double> scores;       ///< empty when the file has none
  std::vector<std::string_view> merges;
  std::optional<std::int64_t> bos, eos, unk, pad;
  bool add_bos = false, add_eos = false, add_space_prefix = true;
};

const gguf_value* typed(const gguf_file& file, std::string_view key, gguf_type type, gguf_type element) {
  const gguf_value* value = file.find(key);
  if (value == nullptr) return nullptr;
  if (value->type != type || (type == gguf_type::array && value->element_type != element)) {
    const std::string expected = type == gguf_type::array ? "an array of " + std::string(gguf_type_name(element))
                                                          : std::string(gguf_type_name(type));
    file.fail_key(key, "must be " + expected);
  }
  return value;
}

std::optional<std::int64_t> token_id(const gguf_file& file, std::string_view key, std::size_t vocab_size) {
  const gguf_value* value = file.find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_integer()) file.fail_key(key, "must be an integer");
  const std::int64_t id = value->type == gguf_type::int32 || value->type == gguf_type::int64
                              ? value->signed_value
                              : static_cast<std::int64_t>(value->unsigned_value);
  if (id < 0 || static_cast<std::uint64_t>(id) >= vocab_size)
    file.fail_key(key, std::to_string(id) + " is outside the " + std::to_string(vocab_size) + " tokens");
  return id;
}

bool flag(const gguf_file& file, std::string_view key, bool fallback) {
  const gguf_value* value = typed(file, key, gguf_type::boolean, gguf_type::boolean);
  return value ? value->unsigned_value != 0 : fallback;
}

gguf_vocab read_vocab(const gguf_file& file) {
  gguf_vocab vocab;
  const gguf_value* model = typed(file, "tokenizer.ggml.model", gguf_type::string, gguf_type::string);
  if (model == nullptr) file.fail_key("tokenizer.ggml.model", "is missing (the file has no tokenizer)");
  vocab.model = model->text;
  const gguf_value* tokens = typed(file, "tokenizer.ggml.tokens", gguf_type::array, gguf_type::string);
  if (tokens == nullptr || tokens->strings.empty()) file.fail_key("tokenizer.ggml.tokens", "is missing or empty");
  vocab.tokens = tokens->strings;
  for (std::size_t i = 0; i < vocab.tokens.size(); ++i)
    if (!is_valid_utf8(vocab.tokens[i]))
      file.fail_key("tokenizer.ggml.tokens", "entry " + std::to_string(i) + " is not valid UTF-8");
  const std::size_t n = vocab.tokens.size();
  vocab.types.assign(n, normal);
  const gguf_value* types = typed(file, "tokenizer.ggml.token_type", gguf_type::array, gguf_type::int32);
  if (types != nullptr) {
    if (types->count != n)
      file.fail_key("tokenizer.ggml.token_type",
                    "has " + std::to_string(types->count) + " entries for " + std::to_string(n) + " tokens");
    for (std::size_t i = 0; i < n; ++i) vocab.types[i] = static_cast<std::int64_t>(types->number_at(i));
  }
  if (const gguf_value* scores = typed(file, "tokenizer.ggml.scores", gguf_type::array, gguf_type::float32)) {
    if (scores->count != n)
      file.fail_key("tokenizer.ggml.scores",
                    "has " + std::to_string(scores->count) + " entries for " + std::to_string(n) + " tokens");
    for (std::size_t i = 0; i < n; ++i) {
      // The merges are sorted by score: a NaN would break the ordering std::sort relies on.
      vocab.scores.push_back(scores->number_at(i));
      if (!std::isfinite(vocab.scores.back()))
        file.fail_key("tokenizer.ggml.scores", "entry " + std::to_string(i) + " is not a finite number");
    }
  }
  if (const gguf_value* merges = typed(file, "tokenizer.ggml.merges", gguf_type::array, gguf_type::string)) {
    vocab.merges = merges->strings;
    for (std::size_t i = 0; i < vocab.merges.size(); ++i)
      if (!is_valid_utf8(vocab.merges[i]))
        file.fail_key("tokenizer.ggml.merges", "entry " + std::to_string(i) + " is not valid UTF-8");
  }
  vocab.bos = token_id(file, "tokenizer.ggml.bos_token_id", n);
  vocab.eos = token_id(file, "tokenizer.ggml.eos_token_id", n);
  vocab.unk = token_id(file, "tokenizer.ggml.unknown_token_id", n);
  vocab.pad = token_id(file, "tokenizer.ggml.padding_token_id", n);
  const bool spm = vocab.model == "llama";
  vocab.add_bos = flag(file, "tokenizer.ggml.add_bos_token", spm);
  vocab.add_eos = flag(file, "tokenizer.ggml.add_eos_token", false);
  vocab.add_space_prefix = flag(file, "tokenizer.ggml.add_space_prefix", true);
  return vocab;
}

bool is_added(std::int64_t type) { return type == control || type == user_defined || type == unknown; }

boost::json::array added_tokens(const gguf_vocab& vocab) {
  boost::json::array out;
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (!is_added(vocab.types[id])) continue;
    out.push_back({{"id", id},
                   {"content", vocab.tokens[id]},
                   {"single_word", false},
                   {"lstrip", false},
                   {"rstrip", false},
                   {"normalized", false},
                   {"special", vocab.types[id] != user_defined}});
  }
  return out;
}

boost::json::value post_processor(const gguf_vocab& vocab) {
  boost::json::array single;
  boost::json::object specials;
  const auto special = [&](std::int64_t id) {
    const std::string text(vocab.tokens[static_cast<std::size_t>(id)]);
    single.push_back(boost::json::object{{"SpecialToken", boost::json::object{{"id", text}, {"type_id", 0}}}});
    specials[text] = boost::json::object{
        {"id", text}, {"ids", boost::json::array{id}}, {"tokens", boost::json::array{boost::json::string(text)}}};
  };
  if (vocab.add_bos && vocab.bos) special(*vocab.bos);
  single.push_back(boost::json::object{{"Sequence", boost::json::object{{"id", "A"}, {"type_id", 0}}}});
  if (vocab.add_eos && vocab.eos) special(*vocab.eos);
  if (specials.empty()) return nullptr;
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}};
}

boost::json::object byte_level_model(const gguf_file& file, const gguf_vocab& vocab, boost::json::object& root) {
  const gguf_value* pre_value = typed(file, "tokenizer.ggml.pre", gguf_type::string, gguf_type::string);
  const std::string_view pre = pre_value ? pre_value->text : "gpt-2";
  boost::json::object byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  bool ignore_merges = false;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "qwen2") {
    const bool llama3 = pre != "qwen2";
    ignore_merges = llama3;
    if (!llama3) root["normalizer"] = {{"type", "NFC"}};
    const boost::json::object split = {{"type", "Split"},
                                       {"pattern", {{"Regex", llama3 ? llama3_regex : qwen2_regex}}},
                                       {"behavior", "Isolated"},
                                       {"invert", false}};
    root["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}};
  } else if (pre == "gpt-2" || pre == "default") {
    byte_level["use_regex"] = true;
    root["pre_tokenizer"] = byte_level;
  } else {
    file.fail_key("tokenizer.ggml.pre",
                  "'" + std::string(pre) + "' is not supported (supported: llama-bpe, qwen2, gpt-2)");
  }
  root["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  boost::json::object words;
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id)
    if (vocab.types[id] != unused && !is_added(vocab.types[id])) words[vocab.tokens[id]] = id;
  boost::json::array merges;
  for (std::string_view merge : vocab.merges) merges.push_back(boost::json::string(merge));
  return {{"type", "BPE"},          {"vocab", words},      {"merges", merges}, {"ignore_merges", ignore_merges},
          {"byte_fallback", false}, {"unk_token", nullptr}};
}

// SentencePiece BPE merges: every split of a token into two vocabulary
// pieces, ranked by the merged token's score (highest first), then by id.
boost::json::array spm_merges(const gguf_vocab& vocab, const std::map<std::string_view, std::size_t>& ids) {
  std::vector<std::tuple<double, std::size_t, std::size_t, std::size_t>> ranked;  // -score, id, left, right
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (vocab.types[id] != normal && vocab.types[id] != user_defined) continue;
    const std::string_view token = vocab.tokens[id];
    for (std::size_t split = 1; split < token.size(); ++split) {
      if ((static_cast<unsigned char>(token[split]) & 0xC0) == 0x80) continue;  // inside a UTF-8 sequence
      const auto left = ids.find(token.substr(0, split)), right = ids.find(token.substr(split));
      if (left != ids.end() && right != ids.end())
        ranked.emplace_back(-vocab.scores[id], id, left->second, right->second);
    }
  }
  std::sort(ranked.begin(), ranked.end());
  boost::json::array merges;
  for (const auto& [score, id, left, right] : ranked)
    merges.push_back({boost::json::string(vocab.tokens[left]), boost::json::string(vocab.tokens[right])});
  return merges;
}

boost::json::object sentencepiece_model(const gguf_file& file, const gguf_vocab& vocab, boost::json::object& root) {
  if (vocab.scores.empty()) file.fail_key("tokenizer.ggml.scores", "is missing (needed by the \"llama\" tokenizer)");
  boost::json::array normalizers;
  if (vocab.add_space_prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}});
  normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}});
  root["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
  boost::json::array decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                 {{"type", "ByteFallback"}},
                                 {{"type", "Fuse"}}};
  if (vocab.add_space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  root["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  boost::json::object words;
  std::map<std::string_view, std::size_t> ids;
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (vocab.types[id] == unused) continue;
    words[vocab.tokens[id]] = id;
    ids.emplace(vocab.tokens[id], id);
  }
  boost::json::value unk = nullptr;
  if (vocab.unk) unk = boost::json::string(vocab.tokens[static_cast<std::size_t>(*vocab.unk)]);
  return {{"type", "BPE"},    {"vocab", words},        {"merges", spm_merges(vocab, ids)},
          {"fuse_unk", true}, {"byte_fallback", true}, {"unk_token", unk}};
}

}  // namespace

gguf_tokenizer_files gguf_tokenizer_json(const gguf_file& file) {
  const gguf_vocab vocab = read_vocab(file);
  boost::json::object root = {{"version", "1.0"}, {"normalizer", nullptr}, {"pre_tokenizer", nullptr}};
  if (vocab.model == "gpt2") {
    root["model"] = byte_level_model(file, vocab, root);
  } else if (vocab.model == "llama") {
    root["model"] = sentencepiece_model(file, vocab, root);
  } else {
    file.fail_key("tokenizer.ggml.model",
                  "'" + std::string(vocab.model) + "' is not supported (supported: gpt2, llama)");
  }
  root["added_tokens"] = added_tokens(vocab);
  root["post_processor"] = post_processor(vocab);
  boost::json::object config = {{"add_bos_token", vocab.add_bos}, {"add_eos_token", vocab.add_eos}};
  const auto name = [&](std::int64_t id) { return boost::json::string(vocab.tokens[static_cast<std::size_t>(id)]); };
  if (vocab.bos) config["bos_token"] = name(*vocab.bos);
  if (vocab.eos) config["eos_token"] = name(*vocab.eos);
  if (vocab.unk) config["unk_token"] = name(*vocab.unk);
  if (vocab.pad) config["pad_token"] = name(*vocab.pad);
  return {boost::json::serialize(root), boost::json::serialize(config)};
}

std::shared_ptr<const text::tokenizer> load_gguf_tokenizer(const gguf_file& file) {
  const gguf_tokenizer_files files = gguf_tokenizer_json(file);
  try {
    return text::tokenizer::from_json(files.tokenizer_json, files.tokenizer_config_json);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(file.display_name() + ": embedded tokenizer: " + error.what());
  }
}

chat_template_source gguf_chat_template(const gguf_file& file) {
  chat_template_source source;
  constexpr std::string_view prefix = "tokenizer.chat_template";
  for (const auto& [key, value] : file.metadata()) {
    if (!key.starts_with(prefix)) continue;
    if (key.size() > prefix.size() && key[prefix.size()] != '.') continue;
    if (value.type != gguf_type::string) file.fail_key(key, "must be a string");
    source.templates[key.size() == prefix.size() ? "default" : key.substr(prefix.size() + 1)] = std::string(value.text);
  }
  const gguf_value* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != gguf_type::array || tokens->element_type != gguf_type::string) return source;
  for (const auto& [field, key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
                                   {"eos_token", "tokenizer.ggml.eos_token_id"},
                                   {"unk_token", "tokenizer.ggml.unknown_token_id"},
                                   {"pad_token", "tokenizer.ggml.padding_token_id"}}) {
    if (const auto id = token_id(file, key, tokens->strings.size()))
      source.special_tokens[field] = tokens->strings[static_cast<std::size_t>(*id)];
  }
  return source;
}

}  // namespace troupe
