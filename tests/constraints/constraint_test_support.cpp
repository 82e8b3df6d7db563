#include "constraint_test_support.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "base/utf8.hpp"
#include "model/text/token_bytes.hpp"

namespace troupe::constraints::testing {
namespace {

bool bit(const std::vector<std::uint32_t>& mask, std::int32_t id) {
  return (mask[static_cast<std::size_t>(id) / 32] >> (static_cast<std::uint32_t>(id) % 32)) & 1u;
}

bool is_eos(const vocabulary& vocab, std::int32_t id) {
  return std::find(vocab.eos_tokens.begin(), vocab.eos_tokens.end(), id) != vocab.eos_tokens.end();
}

/// Checks that the mask agrees with accept_token on `samples` random ids.
std::string check_mask_agrees(token_matcher& matcher, const vocabulary& vocab, const std::vector<std::uint32_t>& mask,
                              std::mt19937& rng, int samples) {
  std::uniform_int_distribution<std::int32_t> any_id(0, static_cast<std::int32_t>(vocab.token_bytes.size()) - 1);
  for (int i = 0; i < samples; ++i) {
    const std::int32_t id = any_id(rng);
    if (is_eos(vocab, id)) continue;
    const bool accepted = matcher.accept_token(id);
    if (accepted) matcher.rollback(1);
    if (accepted != bit(mask, id)) {
      return "token " + std::to_string(id) + " '" + vocab.token_bytes[id] + "': mask says " +
             (bit(mask, id) ? "allowed" : "forbidden") + ", accept_token says " + (accepted ? "accepted" : "refused");
    }
  }
  return {};
}

/// After the step budget: a token that completes the document, else one
/// that closes something, else a short one.
std::int32_t steer(token_matcher& matcher, const vocabulary& vocab, std::vector<std::int32_t> ids, std::mt19937& rng) {
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::size_t tries = std::min<std::size_t>(ids.size(), 64);
  for (std::size_t i = 0; i < tries; ++i) {
    if (!matcher.accept_token(ids[i])) continue;
    const bool complete = matcher.is_complete();
    matcher.rollback(1);
    if (complete) return ids[i];
  }
  for (auto id : ids) {
    const auto& bytes = vocab.token_bytes[id];
    if (bytes.size() <= 3 && bytes.find_first_of("\"]}") != std::string::npos) return id;
  }
  return *std::min_element(ids.begin(), ids.end(),
                           [&](auto a, auto b) { return vocab.token_bytes[a].size() < vocab.token_bytes[b].size(); });
}

}  // namespace

const fixture_vocabulary& load_vocabulary(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, fixture_vocabulary> loaded;
  std::lock_guard lock(mutex);
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second;
  fixture_vocabulary fixture;
  fixture.tok = text::tokenizer::load(std::string(TROUPE_FIXTURES_DIR) + "/text/tokenizers/" + name);
  fixture.vocab.token_bytes = text::vocabulary_bytes(*fixture.tok);
  if (const auto& eos = fixture.tok->eos_token(); eos && eos->id) fixture.vocab.eos_tokens.push_back(*eos->id);
  return loaded.emplace(name, std::move(fixture)).first->second;
}

constraint_compiler& shared_compiler(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<constraint_compiler>> compilers;
  const auto& fixture = load_vocabulary(name);
  std::lock_guard lock(mutex);
  auto& slot = compilers[name];
  if (!slot) slot = std::make_unique<constraint_compiler>(fixture.vocab);
  return *slot;
}

std::wstring widen(const std::string& text) {
  std::wstring wide;
  std::size_t pos = 0;
  while (pos < text.size()) wide.push_back(static_cast<wchar_t>(decode_utf8(text, pos)));
  return wide;
}

std::vector<std::int32_t> allowed_ids(const std::vector<std::uint32_t>& mask, std::size_t vocab_size) {
  std::vector<std::int32_t> ids;
  for (std::size_t id = 0; id < vocab_size; ++id) {
    if ((mask[id / 32] >> (id % 32)) & 1u) ids.push_back(static_cast<std::int32_t>(id));
  }
  return ids;
}

walk_result random_walk(const compiled_constraint& constraint, const vocabulary& vocab, const walk_spec& spec) {
  std::mt19937 rng(spec.seed);
  const std::size_t steps = spec.steps;
  walk_result result;
  auto matcher = constraint.start();
  std::vector<std::uint32_t> mask((vocab.token_bytes.size() + 31) / 32);
  for (std::size_t step = 0; step < steps * 6 + 64; ++step) {
    matcher->fill_allowed(mask);
    std::vector<std::int32_t> eos;
    std::vector<std::int32_t> others;
    for (auto id : allowed_ids(mask, vocab.token_bytes.size())) (is_eos(vocab, id) ? eos : others).push_back(id);
    if (eos.empty() == matcher->is_complete()) return result.failure = "eos bit disagrees with is_complete", result;
    if (eos.empty() && others.empty()) return result.failure = "empty mask after '" + result.text + "'", result;
    if (!others.empty() && matcher->is_terminated()) return result.failure = "terminated but tokens allowed", result;
    if (auto problem = check_mask_agrees(*matcher, vocab, mask, rng, 24); !problem.empty()) {
      return result.failure = problem + " after '" + result.text + "'", result;
    }
    if (!eos.empty() && (others.empty() || step >= steps || rng() % 4 == 0)) {
      result.completed = matcher->accept_token(eos[0]);
      if (!result.completed) result.failure = "eos refused where allowed";
      return result;
    }
    std::int32_t pick = 0;
    if (step >= steps) {
      pick = steer(*matcher, vocab, others, rng);
    } else {
      std::vector<std::int32_t> short_ones;
      for (auto id : others) {
        if (vocab.token_bytes[id].size() <= 2) short_ones.push_back(id);
      }
      const auto& pool = !short_ones.empty() && rng() % 2 == 0 ? short_ones : others;
      pick = pool[rng() % pool.size()];
    }
    if (!matcher->accept_token(pick)) return result.failure = "allowed token refused", result;
    result.text += vocab.token_bytes[pick];
  }
  return result;
}

std::string feed_document(const compiled_constraint& constraint, const fixture_vocabulary& fixture,
                          const std::string& document) {
  auto matcher = constraint.start();
  std::vector<std::uint32_t> mask((fixture.vocab.token_bytes.size() + 31) / 32);
  std::string fed;
  for (auto id : fixture.tok->encode(document, false)) {
    matcher->fill_allowed(mask);
    if (!bit(mask, id)) return "token '" + fixture.vocab.token_bytes[id] + "' masked after '" + fed + "'";
    if (!matcher->accept_token(id)) return "token '" + fixture.vocab.token_bytes[id] + "' refused after '" + fed + "'";
    fed += fixture.vocab.token_bytes[id];
  }
  if (fed != document) return "token bytes do not spell the document: '" + fed + "'";
  if (!matcher->is_complete()) return "not complete at the end";
  return {};
}

}  // namespace troupe::constraints::testing
