#include "model/text/bpe_model.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "base/utf8.hpp"
#include "model/text/byte_level.hpp"

namespace troupe::text {

namespace {

/// Pieces this long or longer bypass the cache (as in HF).
constexpr std::size_t max_cached_piece = 256;

/// SentencePiece's word mark U+2581.
constexpr std::string_view word_mark = "\xE2\x96\x81";

/// Scratch vectors that grew past this many elements are released after use.
constexpr std::size_t max_kept_scratch = 1 << 16;

std::string byte_token_spelling(unsigned b) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "<0x%02X>", b);
  return buffer;
}

std::pair<std::string_view, std::string_view> parse_merge(const json_field& merges, std::size_t rank) {
  const boost::json::value& value = merges.array()[rank];
  if (value.is_string()) {
    const std::string_view text(value.get_string().data(), value.get_string().size());
    const std::size_t space = text.find(' ');
    if (space == std::string_view::npos || text.find(' ', space + 1) != std::string_view::npos) {
      merges.at(rank).fail("expected \"left right\" with exactly one space, got \"" + std::string(text) + "\"");
    }
    return {text.substr(0, space), text.substr(space + 1)};
  }
  if (value.is_array() && value.get_array().size() == 2) {
    const json_field pair = merges.at(rank);
    return {pair.at(std::size_t{0}).string(), pair.at(std::size_t{1}).string()};
  }
  merges.at(rank).fail("expected a string \"left right\" or a pair [left, right]");
}

}  // namespace

bpe_model::bpe_model(const json_field& model, bool byte_symbols) : byte_symbols_(byte_symbols) {
  const std::string_view type = model.at("type").string();
  if (type != "BPE") model.fail("unsupported model type \"" + std::string(type) + "\" (only BPE)");
  load_options(model);
  load_vocab(model.at("vocab"));
  // Refused here: HF loads such a file and fails only when a text needs the
  // unknown token, which would turn a broken model into errors on users' prompts.
  if (unk_token_ && vocab_.find(*unk_token_) == string_map::missing) {
    model.at("unk_token").fail("token \"" + *unk_token_ + "\" is not in the vocabulary");
  }
  load_merges(model.at("merges"));
  if (byte_symbols_) {
    std::string raw;
    for (std::string* affix : {&prefix_, &suffix_}) {
      raw.clear();
      if (!byte_level_to_bytes(*affix, raw)) model.fail("subword prefix/suffix is not byte-level text");
      *affix = raw;
    }
  }
  for (unsigned b = 0; b < 256; ++b) byte_fallback_ids_[b] = vocab_.find(byte_token_spelling(b));
}

void bpe_model::load_options(const json_field& model) {
  unk_token_ = model.get_string("unk_token");
  fuse_unk_ = model.get_bool("fuse_unk").value_or(false);
  byte_fallback_ = model.get_bool("byte_fallback").value_or(false);
  ignore_merges_ = model.get_bool("ignore_merges").value_or(false);
  prefix_ = model.get_string("continuing_subword_prefix").value_or("");
  suffix_ = model.get_string("end_of_word_suffix").value_or("");
  if (const auto dropout = model.find("dropout")) {
    if (!dropout->value().is_number() || dropout->value().to_number<double>() != 0.0) {
      dropout->fail("BPE dropout is not supported (encoding would not be deterministic)");
    }
  }
}

void bpe_model::load_vocab(const json_field& vocab) {
  const auto& entries = vocab.object();
  std::size_t key_bytes = 0;
  std::int64_t largest = -1;
  for (const auto& entry : entries) {
    const auto& id = entry.value();
    if (!id.is_int64() || id.get_int64() < 0 || id.get_int64() > max_token_id) {
      json_field(id, vocab.rules(), vocab.path() + "[\"" + std::string(entry.key()) + "\"]").integer(0, max_token_id);
    }
    largest = std::max(largest, id.to_number<std::int64_t>());
    key_bytes += entry.key().size();
  }
  // Ids index dense tables; a few huge ids must not cost gigabytes.
  if (largest >= static_cast<std::int64_t>(2 * entries.size() + 65536)) {
    vocab.fail("ids are too sparse: largest id " + std::to_string(largest) + " for " + std::to_string(entries.size()) +
               " entries");
  }
  vocab_.reserve(entries.size(), key_bytes);
  spellings_.resize(static_cast<std::size_t>(largest + 1));
  has_spelling_.resize(spellings_.size(), false);
  std::string raw;
  for (const auto& entry : entries) {
    const std::string_view spelling(entry.key().data(), entry.key().size());
    const auto id = static_cast<std::int32_t>(entry.value().to_number<std::int64_t>());
    vocab_.insert(spelling, id);
    spellings_[id] = spelling;
    has_spelling_[id] = true;
    raw.clear();
    if (byte_symbols_ && byte_level_to_bytes(spelling, raw)) symbols_.insert(raw, id);
  }
}

void bpe_model::load_merges(const json_field& merges) {
  const std::size_t count = merges.array().size();
  merges_.reserve(count);
  std::string merged;
  split_at_word_marks_ = !byte_symbols_ && !ignore_merges_ && prefix_.empty() && suffix_.empty() &&
                         vocab_.find(word_mark) != string_map::missing;
  for (std::size_t rank = 0; rank < count; ++rank) {
    const auto lookup = [&](std::string_view token) {
      const std::int32_t id = vocab_.find(token);
      if (id == string_map::missing) {
        merges.at(rank).fail("token \"" + std::string(token) + "\" is not in the vocabulary");
      }
      return id;
    };
    const auto [left, right] = parse_merge(merges, rank);
    if (right.size() < prefix_.size()) merges.at(rank).fail("right token shorter than continuing_subword_prefix");
    if (right.starts_with(word_mark) && !left.ends_with(word_mark)) split_at_word_marks_ = false;
    const std::int32_t left_id = lookup(left);
    const std::int32_t right_id = lookup(right);
    merged.assign(left).append(right.substr(prefix_.size()));
    merges_.insert(left_id, right_id, {static_cast<std::uint32_t>(rank), lookup(merged)});
  }
}

std::optional<std::int32_t> bpe_model::token_to_id(std::string_view token) const {
  const std::int32_t id = vocab_.find(token);
  if (id == string_map::missing) return std::nullopt;
  return id;
}

const std::string* bpe_model::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= spellings_.size() || !has_spelling_[id]) return nullptr;
  return &spellings_[id];
}

std::int32_t bpe_model::unk_id() const {
  const std::int32_t id = vocab_.find(*unk_token_);
  if (id == string_map::missing) {
    throw std::runtime_error("tokenizer.json: model.unk_token \"" + *unk_token_ + "\" is not in the vocabulary");
  }
  return id;
}

bool bpe_model::byte_fallback_symbols(std::string_view symbol_text, std::vector<symbol>& symbols) const {
  std::string spelled;
  if (byte_symbols_) {
    append_byte_level(symbol_text, spelled);
    symbol_text = spelled;
  }
  for (const char b : symbol_text) {
    if (byte_fallback_ids_[static_cast<unsigned char>(b)] == string_map::missing) return false;
  }
  for (const char b : symbol_text) symbols.push_back({byte_fallback_ids_[static_cast<unsigned char>(b)], 0, 0, true});
  return true;
}

void bpe_model::initial_symbols(std::string_view piece, std::vector<symbol>& symbols) const {
  const string_map& lookup = byte_symbols_ ? symbols_ : vocab_;
  bool pending_unk = false;
  std::string affixed;
  std::size_t position = 0;
  while (position < piece.size()) {
    const std::size_t begin = position;
    position += byte_symbols_ ? 1 : utf8_length(static_cast<unsigned char>(piece[position]));
    std::string_view key = piece.substr(begin, position - begin);
    const bool add_prefix = begin != 0 && !prefix_.empty();
    const bool add_suffix = position == piece.size() && !suffix_.empty();
    if (add_prefix || add_suffix) {
      affixed.assign(add_prefix ? prefix_ : "").append(key).append(add_suffix ? suffix_ : "");
      key = affixed;
    }
    const std::int32_t id = lookup.find(key);
    if (id != string_map::missing) {
      if (pending_unk) symbols.push_back({unk_id(), 0, 0, true});
      pending_unk = false;
      symbols.push_back({id, 0, 0, true});
      continue;
    }
    // HF leaves a pending unk in place across byte-fallback symbols.
    if (byte_fallback_ && byte_fallback_symbols(key, symbols)) continue;
    if (!unk_token_) continue;  // no unk token: the character is dropped
    if (pending_unk && !fuse_unk_) symbols.push_back({unk_id(), 0, 0, true});
    pending_unk = true;
    unk_id();  // fails early when the unk token is missing
  }
  if (pending_unk) symbols.push_back({unk_id(), 0, 0, true});
}

void bpe_model::merge(std::vector<symbol>& symbols) const {
  const auto count = static_cast<std::int32_t>(symbols.size());
  for (std::int32_t i = 0; i < count; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < count ? i + 1 : -1;
  }
  thread_local std::vector<candidate> heap;
  heap.clear();
  // Min-heap on (rank, position): the lowest-ranked merge, leftmost first.
  const auto later = [](const candidate& a, const candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
  };
  for (std::int32_t i = 0; i + 1 < count; ++i) {
    if (const merge_rule* rule = merges_.find(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back({rule->rank, i, rule->merged});
    }
  }
  std::make_heap(heap.begin(), heap.end(), later);
  const auto push = [&](std::int32_t left) {
    const symbol& a = symbols[left];
    if (const merge_rule* rule = merges_.find(a.id, symbols[a.next].id)) {
      heap.push_back({rule->rank, left, rule->merged});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const candidate top = heap.back();
    heap.pop_back();
    symbol& left = symbols[top.position];
    if (!left.alive || left.next == -1) continue;
    symbol& right = symbols[left.next];
    // Skip stale entries: the pair at this position changed since it was queued.
    const merge_rule* rule = merges_.find(left.id, right.id);
    if (rule == nullptr || rule->merged != top.merged) continue;
    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next != -1) symbols[right.next].prev = top.position;
    if (left.prev != -1) push(left.prev);
    if (left.next != -1) push(top.position);
  }
  if (heap.capacity() > max_kept_scratch) heap = {};
}

void bpe_model::tokenize(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (!split_at_word_marks_) return tokenize_word(piece, out);
  // No merge joins a character to a following mark, so the words between
  // marks merge independently and give the same ids as the whole piece.
  std::size_t start = 0;
  for (std::size_t position = piece.find(word_mark, 1); position != std::string_view::npos;
       position = piece.find(word_mark, position + word_mark.size())) {
    if (position >= word_mark.size() && piece.substr(position - word_mark.size(), word_mark.size()) == word_mark) {
      continue;
    }
    tokenize_word(piece.substr(start, position - start), out);
    start = position;
  }
  tokenize_word(piece.substr(start), out);
}

void bpe_model::tokenize_word(std::string_view piece, std::vector<std::int32_t>& out) const {
  const std::uint64_t hash = hash_bytes(piece);
  if (thread_piece_cache::find(cache_owner_, piece, hash, out)) return;
  const std::size_t first = out.size();
  const string_map& lookup = byte_symbols_ ? symbols_ : vocab_;
  const std::int32_t whole = ignore_merges_ ? lookup.find_hashed(piece, hash) : string_map::missing;
  const bool cacheable = piece.size() < max_cached_piece;
  if (whole != string_map::missing) {
    out.push_back(whole);
  } else if (!cacheable || !cache_.find(piece, hash, out)) {
    thread_local std::vector<symbol> symbols;
    symbols.clear();
    initial_symbols(piece, symbols);
    if (symbols.size() > 1) merge(symbols);
    for (const symbol& s : symbols) {
      if (s.alive) out.push_back(s.id);
    }
    if (symbols.capacity() > max_kept_scratch) symbols = {};
    if (cacheable) cache_.insert(piece, hash, std::span<const std::int32_t>(out.data() + first, out.size() - first));
  }
  thread_piece_cache::insert(cache_owner_, piece, hash,
                             std::span<const std::int32_t>(out.data() + first, out.size() - first));
}

}  // namespace troupe::text
