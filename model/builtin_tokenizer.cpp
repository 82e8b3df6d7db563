#include "model/builtin_tokenizer.hpp"

#include <algorithm>
#include <array>
#include <boost/json/value.hpp>
#include <cctype>
#include <map>
#include <utility>
#include <vector>

#include "base/utf8.hpp"
#include "model/python_json.hpp"

namespace troupe {

namespace {

constexpr std::array<std::string_view, 5> special_tokens = {"<|begin_of_text|>", "<|end_of_text|>",
                                                            "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};

// Same expression as Llama 3's tokenizer.json, so the pre-tokenizer that
// runs at inference is the familiar one.
constexpr std::string_view split_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the
// rest are shifted past U+0100. Entry i is the token with id i; byte_id
// maps a byte to its token id.
struct byte_alphabet {
  std::array<std::string, 256> token;
  std::array<int, 256> byte_id{};

  byte_alphabet() {
    std::vector<int> order;
    const auto printable = [](int b) {
      return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    };
    for (int b = 0; b < 256; ++b) {
      if (printable(b)) order.push_back(b);
    }
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
      if (!printable(b)) order.push_back(b);
    }
    for (std::size_t id = 0; id < order.size(); ++id) {
      const int b = order[id];
      const char32_t code = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + shifted++);
      append_utf8(token[id], code);
      byte_id[static_cast<std::size_t>(b)] = static_cast<int>(id);
    }
  }
};

bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_newline(char c) { return c == '\n' || c == '\r'; }
bool is_symbol(char c) { return !is_letter(c) && !is_digit(c) && !is_space(c); }

// Length of the pre-token at text[i], following split_pattern's
// alternatives on ASCII text (all the corpus holds).
std::size_t pre_token_length(std::string_view text, std::size_t i) {
  const std::size_t n = text.size();
  const auto at = [&](std::size_t k) { return k < n ? text[k] : '\0'; };
  if (text[i] == '\'') {
    for (std::string_view suffix : {"re", "ve", "ll", "s", "t", "m", "d"}) {
      bool match = i + suffix.size() < n;
      for (std::size_t k = 0; match && k < suffix.size(); ++k) match = std::tolower(at(i + 1 + k)) == suffix[k];
      if (match) return 1 + suffix.size();
    }
  }
  std::size_t j = i;
  if (is_letter(at(j)) || (!is_newline(at(j)) && !is_letter(at(j)) && !is_digit(at(j)) && is_letter(at(j + 1)))) {
    j += is_letter(at(j)) ? 0 : 1;
    while (is_letter(at(j))) ++j;
    return j - i;
  }
  if (is_digit(at(j))) {
    while (j < i + 3 && is_digit(at(j))) ++j;
    return j - i;
  }
  if (is_symbol(at(j)) || (at(j) == ' ' && is_symbol(at(j + 1)))) {
    j += at(j) == ' ' ? 1 : 0;
    while (is_symbol(at(j))) ++j;
    while (is_newline(at(j))) ++j;
    return j - i;
  }
  while (j < n && is_space(at(j))) ++j;  // a whitespace run
  std::size_t last_newline = std::string_view::npos;
  for (std::size_t k = i; k < j; ++k) {
    if (is_newline(text[k])) last_newline = k;
  }
  if (last_newline != std::string_view::npos) return last_newline + 1 - i;
  if (j < n && j - i > 1) return j - i - 1;  // leave one space to lead the next word
  return j - i;
}

// Learns merges from the corpus: repeatedly joins the most frequent adjacent
// pair (ties: the lexicographically smallest pair of token strings).
std::vector<std::pair<int, int>> learn_merges(const byte_alphabet& alphabet, std::vector<std::string>& tokens) {
  std::map<std::string, long> word_counts;
  const std::string_view text = builtin_tokenizer_corpus();
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = pre_token_length(text, i);
    ++word_counts[std::string(text.substr(i, length))];
    i += length;
  }
  std::vector<std::pair<std::vector<int>, long>> words;
  for (const auto& [word, count] : word_counts) {
    std::vector<int> symbols;
    for (unsigned char c : word) symbols.push_back(alphabet.byte_id[c]);
    words.emplace_back(std::move(symbols), count);
  }
  std::vector<std::pair<int, int>> merges;
  while (static_cast<int>(merges.size()) < builtin_tokenizer_target_merges) {
    std::map<std::pair<int, int>, long> pair_counts;
    for (const auto& [symbols, count] : words) {
      for (std::size_t k = 0; k + 1 < symbols.size(); ++k) pair_counts[{symbols[k], symbols[k + 1]}] += count;
    }
    const std::pair<int, int>* best = nullptr;
    long best_count = 1;
    for (const auto& [pair, count] : pair_counts) {
      const auto key = [&](const std::pair<int, int>& p) { return std::make_pair(tokens[p.first], tokens[p.second]); };
      if (count > best_count || (best != nullptr && count == best_count && key(pair) < key(*best))) {
        best = &pair;
        best_count = count;
      }
    }
    if (best == nullptr) break;
    const std::pair<int, int> merge = *best;
    // Two different pairs can spell the same string; the vocabulary holds it once.
    const std::string spelled = tokens[merge.first] + tokens[merge.second];
    auto existing = std::find(tokens.begin(), tokens.end(), spelled);
    const int merged = static_cast<int>(existing - tokens.begin());
    if (existing == tokens.end()) tokens.push_back(spelled);
    merges.push_back(merge);
    for (auto& [symbols, count] : words) {
      std::vector<int> joined;
      for (std::size_t k = 0; k < symbols.size(); ++k) {
        const bool match = k + 1 < symbols.size() && symbols[k] == merge.first && symbols[k + 1] == merge.second;
        joined.push_back(match ? merged : symbols[k]);
        k += match ? 1 : 0;
      }
      symbols = std::move(joined);
    }
  }
  return merges;
}

}  // namespace

std::string_view builtin_chat_template() {
  return "{{- bos_token }}\n"
         "{%- for message in messages %}\n"
         "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
         "'<|eot_id|>' }}\n"
         "{%- endfor %}\n"
         "{%- if add_generation_prompt %}\n"
         "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
         "{%- endif %}\n";
}

namespace {

boost::json::object added_token(std::int64_t id, std::string_view content, bool with_id) {
  boost::json::object token;
  if (with_id) token["id"] = id;
  token["content"] = content;
  token["single_word"] = false;
  token["lstrip"] = false;
  token["rstrip"] = false;
  token["normalized"] = false;
  token["special"] = true;
  return token;
}

boost::json::value bos_template_processing(std::int64_t bos_id) {
  const std::string bos(special_tokens[0]);
  const auto special = [&](int type_id) {
    return boost::json::object{{"SpecialToken", {{"id", bos}, {"type_id", type_id}}}};
  };
  const auto sequence = [](std::string_view name, int type_id) {
    return boost::json::object{{"Sequence", {{"id", name}, {"type_id", type_id}}}};
  };
  return {{"type", "TemplateProcessing"},
          {"single", boost::json::array{special(0), sequence("A", 0)}},
          {"pair", boost::json::array{special(0), sequence("A", 0), special(1), sequence("B", 1)}},
          {"special_tokens",
           {{bos, {{"id", bos}, {"ids", boost::json::array{bos_id}}, {"tokens", boost::json::array{bos}}}}}}};
}

boost::json::value byte_level(bool add_prefix_space, bool trim_offsets, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", trim_offsets},
          {"use_regex", use_regex}};
}

std::string tokenizer_json_text(const std::vector<std::string>& tokens,
                                const std::vector<std::pair<int, int>>& merges) {
  boost::json::array added;
  for (std::size_t k = 0; k < special_tokens.size(); ++k) {
    added.push_back(added_token(static_cast<std::int64_t>(tokens.size() + k), special_tokens[k], true));
  }
  boost::json::object vocab;
  for (std::size_t id = 0; id < tokens.size(); ++id) vocab[tokens[id]] = static_cast<std::int64_t>(id);
  boost::json::array merge_list;
  for (const auto& [left, right] : merges)
    merge_list.push_back(boost::json::string(tokens[left] + " " + tokens[right]));
  const boost::json::value split = {
      {"type", "Split"}, {"pattern", {{"Regex", split_pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  const boost::json::value document = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", std::move(added)},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"}, {"pretokenizers", boost::json::array{split, byte_level(false, true, false)}}}},
      {"post_processor",
       {{"type", "Sequence"},
        {"processors", boost::json::array{byte_level(true, false, true),
                                          bos_template_processing(static_cast<std::int64_t>(tokens.size()))}}}},
      {"decoder", byte_level(true, true, true)},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", true},
        {"vocab", std::move(vocab)},
        {"merges", std::move(merge_list)}}}};
  return to_python_json(document, {.sort_keys = false, .ensure_ascii = false}) + "\n";
}

std::string tokenizer_config_text(std::int64_t first_special_id, std::int64_t model_max_length) {
  boost::json::object decoder;
  for (std::size_t k = 0; k < special_tokens.size(); ++k) {
    decoder[std::to_string(first_special_id + static_cast<std::int64_t>(k))] = added_token(0, special_tokens[k], false);
  }
  const boost::json::value config = {{"added_tokens_decoder", std::move(decoder)},
                                     {"bos_token", special_tokens[0]},
                                     {"chat_template", builtin_chat_template()},
                                     {"clean_up_tokenization_spaces", false},
                                     {"eos_token", special_tokens[4]},
                                     {"model_input_names", boost::json::array{"input_ids", "attention_mask"}},
                                     {"model_max_length", model_max_length},
                                     {"tokenizer_class", "PreTrainedTokenizerFast"}};
  return to_python_json(config, {.sort_keys = true, .ensure_ascii = false}) + "\n";
}

}  // namespace

builtin_tokenizer make_builtin_tokenizer(std::int64_t model_max_length) {
  const byte_alphabet alphabet;
  std::vector<std::string> tokens(alphabet.token.begin(), alphabet.token.end());
  const std::vector<std::pair<int, int>> merges = learn_merges(alphabet, tokens);
  builtin_tokenizer out;
  const auto first_special = static_cast<std::int64_t>(tokens.size());
  out.tokenizer_json = tokenizer_json_text(tokens, merges);
  out.tokenizer_config_json = tokenizer_config_text(first_special, model_max_length);
  out.size = first_special + static_cast<std::int64_t>(special_tokens.size());
  out.begin_of_text_id = first_special;
  out.end_of_text_id = first_special + 1;
  out.eot_id = first_special + 4;
  return out;
}

}  // namespace troupe
