#include "model/text/incremental_detokenizer.hpp"

#include <stdexcept>

#include "model/text/decode_stream.hpp"
#include "model/text/tokenizer_impl.hpp"

namespace troupe::text {

incremental_detokenizer::incremental_detokenizer(std::shared_ptr<const tokenizer> tok, bool skip_special_tokens)
    : tokenizer_(std::move(tok)), skip_special_tokens_(skip_special_tokens) {
  if (!tokenizer_) throw std::invalid_argument("incremental_detokenizer: null tokenizer");
  const auto& decoder = tokenizer_->impl_->decoder;
  stream_ = std::make_unique<decode_stream>(decoder ? &*decoder : nullptr);
}

incremental_detokenizer::~incremental_detokenizer() = default;
incremental_detokenizer::incremental_detokenizer(incremental_detokenizer&&) noexcept = default;
incremental_detokenizer& incremental_detokenizer::operator=(incremental_detokenizer&&) noexcept = default;

std::string incremental_detokenizer::push(token_id id) { return push(std::span<const token_id>(&id, 1)); }

std::string incremental_detokenizer::push(std::span<const token_id> ids) {
  if (finished_) throw std::logic_error("incremental_detokenizer: push after finish");
  std::string delta;
  for (const token_id id : ids) {
    if (const std::string* piece = tokenizer_->decode_piece(id, skip_special_tokens_)) stream_->push(*piece, delta);
  }
  return delta;
}

std::string incremental_detokenizer::finish() {
  std::string rest;
  if (!finished_) stream_->finish(rest);
  finished_ = true;
  return rest;
}

}  // namespace troupe::text
