#include "model/text/decode_stream.hpp"

#include <utility>

#include "base/utf8.hpp"
#include "model/text/byte_level.hpp"

namespace troupe::text {

/// Collects the final text; joins tokens with `separator`.
class decode_stream::output_stage final : public stream_stage {
 public:
  explicit output_stage(std::string separator) : separator_(std::move(separator)) {}
  void token(std::string_view text) override {
    if (tokens_++ > 0) text_.append(separator_);
    text_.append(text);
  }
  void extend(std::string_view text) override { text_.append(text); }
  void finish() override {}
  std::string take() { return std::exchange(text_, {}); }

 private:
  std::string separator_;
  std::string text_;
  std::size_t tokens_ = 0;
};

namespace {

constexpr std::string_view replacement_char = "\xEF\xBF\xBD";

/// Base for stages that need whole tokens: downstream of a merging stage it
/// holds the growing token until the next token or the end.
class whole_token_stage : public stream_stage {
 public:
  whole_token_stage(stream_stage& next, bool upstream_merges) : next_(next), buffering_(upstream_merges) {}
  void token(std::string_view text) final {
    if (!buffering_) return whole_token(text);
    if (has_buffer_) whole_token(buffer_);
    buffer_.assign(text);
    has_buffer_ = true;
  }
  void extend(std::string_view text) final { buffer_.append(text); }
  void finish() final {
    if (has_buffer_) whole_token(buffer_);
    has_buffer_ = false;
    end_of_stream();
    next_.finish();
  }

 protected:
  virtual void whole_token(std::string_view text) = 0;
  virtual void end_of_stream() {}
  stream_stage& next_;

 private:
  bool buffering_;
  bool has_buffer_ = false;
  std::string buffer_;
};

/// ByteLevel: token characters back to bytes; one output token that grows
/// by every complete UTF-8 character (ill-formed parts become U+FFFD).
class byte_level_stage final : public whole_token_stage {
 public:
  using whole_token_stage::whole_token_stage;

 private:
  void whole_token(std::string_view text) override {
    if (!byte_level_to_bytes(text, pending_)) pending_.append(text);
    std::string ready;
    pending_.erase(0, utf8_lossy_stream(pending_, ready));
    emit(ready);
  }
  void end_of_stream() override {
    emit(pending_.empty() ? std::string() : std::string(replacement_char));
    pending_.clear();
  }
  void emit(std::string_view text) {
    if (!started_) {
      started_ = true;
      next_.token(text);
    } else if (!text.empty()) {
      next_.extend(text);
    }
  }
  std::string pending_;  ///< bytes of an incomplete character
  bool started_ = false;
};

/// ByteFallback: a run of <0xHH> tokens becomes its UTF-8 text, or one
/// U+FFFD per byte if the run is ill-formed, so the run is held until it ends.
class byte_fallback_stage final : public whole_token_stage {
 public:
  using whole_token_stage::whole_token_stage;

 private:
  void whole_token(std::string_view text) override {
    const int value = byte_fallback_value(text);
    if (value >= 0) {
      run_.push_back(static_cast<char>(value));
      return;
    }
    flush();
    next_.token(text);
  }
  void end_of_stream() override { flush(); }
  void flush() {
    if (run_.empty()) return;
    if (find_invalid_utf8(run_)) {
      for (std::size_t i = 0; i < run_.size(); ++i) next_.token(replacement_char);
    } else {
      next_.token(run_);
    }
    run_.clear();
  }
  std::string run_;
};

/// Replace: whole tokens are replaced at once; downstream of a merge, a
/// literal pattern streams with a hold-back of a possible partial match and
/// a regex pattern waits for the end of the token.
class replace_stage final : public stream_stage {
 public:
  replace_stage(stream_stage& next, const decoder_spec& spec, bool upstream_merges)
      : next_(next), spec_(spec), upstream_merges_(upstream_merges) {}
  void token(std::string_view text) override {
    if (!upstream_merges_) return next_.token(spec_.pattern->replace_all(text, spec_.text));
    flush_held();
    held_.assign(text);
    next_.token(release());
  }
  void extend(std::string_view text) override {
    held_.append(text);
    const std::string ready = release();
    if (!ready.empty()) next_.extend(ready);
  }
  void finish() override {
    flush_held();
    next_.finish();
  }

 private:
  /// Replaces what is final in held_ and keeps a suffix that may still match.
  std::string release() {
    const std::string_view literal = spec_.pattern->literal_text();
    std::size_t keep = held_.size();  // a regex waits for the whole token
    if (!literal.empty()) {
      std::vector<match_range> matches;
      spec_.pattern->find_matches(held_, matches);
      const std::size_t after_last = matches.empty() ? 0 : matches.back().end;
      keep = 0;
      for (std::size_t length = std::min(literal.size() - 1, held_.size() - after_last); length > 0; --length) {
        if (literal.starts_with(std::string_view(held_).substr(held_.size() - length))) {
          keep = length;
          break;
        }
      }
    }
    std::string ready = spec_.pattern->replace_all(std::string_view(held_).substr(0, held_.size() - keep), spec_.text);
    held_.erase(0, held_.size() - keep);
    return ready;
  }
  void flush_held() {
    if (held_.empty()) return;
    const std::string ready = spec_.pattern->replace_all(held_, spec_.text);
    held_.clear();
    if (!ready.empty()) next_.extend(ready);
  }
  stream_stage& next_;
  const decoder_spec& spec_;
  bool upstream_merges_;
  std::string held_;
};

/// Fuse: all tokens become one.
class fuse_stage final : public stream_stage {
 public:
  explicit fuse_stage(stream_stage& next) : next_(next) {}
  void token(std::string_view text) override { extend(text); }
  void extend(std::string_view text) override {
    if (!started_) {
      started_ = true;
      next_.token(text);
    } else if (!text.empty()) {
      next_.extend(text);
    }
  }
  void finish() override {
    if (!started_) next_.token("");
    next_.finish();
  }

 private:
  stream_stage& next_;
  bool started_ = false;
};

/// Strip: removes up to `start` leading and `stop` trailing copies of one
/// character per token; trailing copies are held until the token goes on.
class strip_stage final : public stream_stage {
 public:
  strip_stage(stream_stage& next, const decoder_spec& spec) : next_(next), spec_(spec) {}
  void token(std::string_view text) override {
    held_ = 0;
    leading_left_ = spec_.strip_start;
    next_.token(process(text));
  }
  void extend(std::string_view text) override {
    const std::string ready = process(text);
    if (!ready.empty()) next_.extend(ready);
  }
  void finish() override { next_.finish(); }

 private:
  std::string process(std::string_view text) {
    std::string out;
    const std::string& content = spec_.text;
    std::size_t position = 0;
    while (position < text.size()) {
      const std::size_t begin = position;
      decode_utf8(text, position);
      const std::string_view c = text.substr(begin, position - begin);
      const bool is_content = c == content;
      if (leading_left_ > 0 && is_content) {
        --leading_left_;
        continue;
      }
      leading_left_ = 0;
      if (spec_.strip_stop > 0 && is_content) {
        if (held_ == spec_.strip_stop) {
          out.append(content);
        } else {
          ++held_;
        }
        continue;
      }
      for (; held_ > 0; --held_) out.append(content);
      out.append(c);
    }
    return out;
  }
  stream_stage& next_;
  const decoder_spec& spec_;
  std::size_t leading_left_ = 0;
  std::size_t held_ = 0;  ///< trailing copies of the character not yet released
};

/// Metaspace: the replacement character becomes a space, except in the
/// first token when a prefix was prepended (there it is dropped).
class metaspace_stage final : public stream_stage {
 public:
  metaspace_stage(stream_stage& next, const decoder_spec& spec) : next_(next), spec_(spec) {}
  void token(std::string_view text) override {
    ++tokens_;
    next_.token(map(text));
  }
  void extend(std::string_view text) override {
    const std::string mapped = map(text);
    if (!mapped.empty()) next_.extend(mapped);
  }
  void finish() override { next_.finish(); }

 private:
  std::string map(std::string_view text) const {
    const bool drop = tokens_ == 1 && spec_.metaspace_prepend;
    std::string out;
    std::size_t position = 0;
    while (position < text.size()) {
      if (text.substr(position).starts_with(spec_.text)) {
        if (!drop) out.push_back(' ');
        position += spec_.text.size();
      } else {
        out.push_back(text[position++]);
      }
    }
    return out;
  }
  stream_stage& next_;
  const decoder_spec& spec_;
  std::size_t tokens_ = 0;
};

void flatten(const decoder_spec& spec, std::vector<const decoder_spec*>& out) {
  if (spec.type != decoder_spec::kind::sequence) {
    out.push_back(&spec);
    return;
  }
  for (const decoder_spec& child : spec.children) flatten(child, out);
}

std::unique_ptr<stream_stage> make_stage(const decoder_spec& spec, stream_stage& next, bool upstream_merges) {
  switch (spec.type) {
    case decoder_spec::kind::byte_level:
      return std::make_unique<byte_level_stage>(next, upstream_merges);
    case decoder_spec::kind::byte_fallback:
      return std::make_unique<byte_fallback_stage>(next, upstream_merges);
    case decoder_spec::kind::fuse:
      return std::make_unique<fuse_stage>(next);
    case decoder_spec::kind::strip:
      return std::make_unique<strip_stage>(next, spec);
    case decoder_spec::kind::replace:
      return std::make_unique<replace_stage>(next, spec, upstream_merges);
    case decoder_spec::kind::metaspace:
      return std::make_unique<metaspace_stage>(next, spec);
    case decoder_spec::kind::sequence:
      break;
  }
  return nullptr;
}

}  // namespace

decode_stream::decode_stream(const decoder_spec* spec) {
  std::vector<const decoder_spec*> steps;
  if (spec != nullptr) flatten(*spec, steps);
  auto output = std::make_unique<output_stage>(spec == nullptr ? " " : "");
  output_ = output.get();
  // A stage is downstream of a merge if any earlier step is ByteLevel or Fuse.
  std::vector<bool> upstream_merges(steps.size(), false);
  for (std::size_t i = 1; i < steps.size(); ++i) {
    const auto previous = steps[i - 1]->type;
    upstream_merges[i] =
        upstream_merges[i - 1] || previous == decoder_spec::kind::byte_level || previous == decoder_spec::kind::fuse;
  }
  std::vector<std::unique_ptr<stream_stage>> reversed;
  reversed.push_back(std::move(output));
  for (std::size_t i = steps.size(); i-- > 0;) {
    reversed.push_back(make_stage(*steps[i], *reversed.back(), upstream_merges[i]));
  }
  stages_.assign(std::make_move_iterator(reversed.rbegin()), std::make_move_iterator(reversed.rend()));
}

decode_stream::~decode_stream() = default;
decode_stream::decode_stream(decode_stream&&) noexcept = default;
decode_stream& decode_stream::operator=(decode_stream&&) noexcept = default;

void decode_stream::collect(std::string& out) { out.append(output_->take()); }

void decode_stream::push(std::string_view token, std::string& out) {
  stages_.front()->token(token);
  collect(out);
}

void decode_stream::finish(std::string& out) {
  stages_.front()->finish();
  collect(out);
}

}  // namespace troupe::text
