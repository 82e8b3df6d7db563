#include "model/text/tokenizer.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "base/utf8.hpp"
#include "model/text/tokenizer_impl.hpp"

namespace troupe::text {

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(path.string() + ": cannot open file");
  std::ostringstream contents;
  contents << file.rdbuf();
  if (!file && !file.eof()) throw std::runtime_error(path.string() + ": read failed");
  return std::move(contents).str();
}

}  // namespace

void tokenizer::impl::encode_plain(std::string_view text, bool at_origin, std::vector<token_id>& ids) const {
  if (text.empty()) return;
  thread_local split_text work;
  work.text.assign(text);
  work.pieces.assign(1, text_piece{0, text.size(), at_origin});
  if (pre) pre->pre_tokenize(work);
  const std::string_view all = work.text;
  for (const text_piece& piece : work.pieces) model->tokenize(all.substr(piece.begin, piece.end - piece.begin), ids);
  // Do not keep megabytes of scratch alive in the thread after a huge input.
  if (work.text.capacity() > (1 << 20)) work = split_text{};
}

void tokenizer::impl::encode_body(std::string_view text, std::vector<token_id>& ids) const {
  std::vector<added_split> raw_splits;
  added->split(text, false, raw_splits);
  std::vector<added_split> normalized_splits;
  std::string normalized;
  for (const added_split& raw : raw_splits) {
    if (raw.id != added_split::plain) {
      ids.push_back(raw.id);
      continue;
    }
    std::string_view segment = text.substr(raw.begin, raw.end - raw.begin);
    if (norm) {
      normalized.assign(segment);
      norm->normalize(normalized);
      segment = normalized;
    }
    if (!added->has_tokens(true)) {
      encode_plain(segment, raw.begin == 0, ids);
      continue;
    }
    normalized_splits.clear();
    added->split(segment, true, normalized_splits);
    for (const added_split& part : normalized_splits) {
      if (part.id != added_split::plain) {
        ids.push_back(part.id);
      } else {
        encode_plain(segment.substr(part.begin, part.end - part.begin), raw.begin == 0 && part.begin == 0, ids);
      }
    }
  }
}

tokenizer::tokenizer(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
tokenizer::~tokenizer() = default;

std::shared_ptr<const tokenizer> tokenizer::load(const std::filesystem::path& dir) {
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  const std::string json = read_file(dir / "tokenizer.json");
  const std::string config = std::filesystem::exists(config_path) ? read_file(config_path) : std::string();
  return from_json(json, config);
}

std::shared_ptr<const tokenizer> tokenizer::from_json(std::string_view tokenizer_json,
                                                      std::string_view tokenizer_config_json) {
  return std::shared_ptr<const tokenizer>(new tokenizer(load_tokenizer_parts(tokenizer_json, tokenizer_config_json)));
}

std::vector<token_id> tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const auto offset = find_invalid_utf8(text)) {
    throw std::invalid_argument("encode: invalid UTF-8 at byte offset " + std::to_string(*offset));
  }
  std::vector<token_id> ids;
  ids.reserve(text.size() / 3 + 4);
  const bool wrap = add_special_tokens && impl_->post;
  if (wrap) ids.insert(ids.end(), impl_->post->before.begin(), impl_->post->before.end());
  impl_->encode_body(text, ids);
  if (wrap) ids.insert(ids.end(), impl_->post->after.begin(), impl_->post->after.end());
  return ids;
}

const std::string* tokenizer::decode_piece(token_id id, bool skip_special_tokens) const {
  if (const added_token* added = impl_->added->find(id)) {
    return skip_special_tokens && impl_->added->is_special_content(added->spelling) ? nullptr : &added->spelling;
  }
  const std::string* spelling = impl_->model->id_to_token(id);
  if (spelling != nullptr && skip_special_tokens && impl_->added->is_special_content(*spelling)) return nullptr;
  return spelling;
}

std::string tokenizer::decode(std::span<const token_id> ids, bool skip_special_tokens) const {
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (const token_id id : ids) {
    if (const std::string* piece = decode_piece(id, skip_special_tokens)) pieces.push_back(*piece);
  }
  return decode_tokens(impl_->decoder ? &*impl_->decoder : nullptr, std::move(pieces));
}

int tokenizer::vocab_size() const { return std::max(impl_->model->id_limit(), impl_->added->id_limit()); }

std::optional<token_id> tokenizer::token_to_id(std::string_view token) const {
  if (const auto added = impl_->added->token_to_id(token)) return added;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> tokenizer::id_to_token(token_id id) const {
  const std::string* spelling = decode_piece(id, false);
  if (spelling == nullptr) return std::nullopt;
  return *spelling;
}

bool tokenizer::is_special(token_id id) const {
  const added_token* added = impl_->added->find(id);
  return added != nullptr && added->special;
}

const std::optional<special_token>& tokenizer::bos_token() const { return impl_->bos; }
const std::optional<special_token>& tokenizer::eos_token() const { return impl_->eos; }
const std::optional<special_token>& tokenizer::pad_token() const { return impl_->pad; }
std::optional<bool> tokenizer::add_bos_token() const { return impl_->add_bos_token; }
std::optional<bool> tokenizer::add_eos_token() const { return impl_->add_eos_token; }

}  // namespace troupe::text
