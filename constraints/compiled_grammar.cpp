#include "constraints/compiled_grammar.hpp"

#include <algorithm>
#include <numeric>

#include "constraints/pushdown.hpp"
#include "constraints/state_classes.hpp"
#include "constraints/table_precompute.hpp"

namespace troupe::constraints {
namespace {

/// One sequence's walk: the configuration after each accepted token, so a
/// rollback is a pop.
class pushdown_matcher final : public token_matcher {
 public:
  explicit pushdown_matcher(std::shared_ptr<const compiled_grammar> grammar)
      : grammar_(std::move(grammar)), runner_(grammar_->machine(), grammar_->max_depth()) {
    const auto start = grammar_->machine().rule_start[grammar_->machine().start_rule];
    history_.push_back({{start, -1}});
    ended_.push_back(false);
  }

  void fill_allowed(std::span<std::uint32_t> allowed) const override {
    std::fill(allowed.begin(), allowed.end(), 0u);
    if (ended_.back()) return;
    const auto& trie = grammar_->trie();
    configuration scratch;
    for (const auto& top : history_.back()) {
      // Frames below the key still count against the depth cap.
      auto frames = top_frames(runner_.pool(), top, table_key_frames);
      const std::size_t below = runner_.pool().depth_of(top.parent) - frames.size();
      const auto table =
          grammar_->table(std::move(frames), grammar_->max_depth() - std::min(below, grammar_->max_depth()));
      table->add_accepted(allowed);
      for (auto id : table->uncertain) {
        if (runner_.advance({top}, trie.token_bytes[id], scratch)) set_bit(allowed, id);
      }
    }
    if (closed().complete) {
      for (auto id : trie.eos_tokens) set_bit(allowed, id);
    }
  }

  bool accept_token(std::int32_t token) override {
    if (ended_.back()) return false;
    const auto& trie = grammar_->trie();
    if (std::find(trie.eos_tokens.begin(), trie.eos_tokens.end(), token) != trie.eos_tokens.end()) {
      if (!closed().complete) return false;
      history_.push_back(history_.back());
      ended_.push_back(true);
      return true;
    }
    if (token < 0 || static_cast<std::size_t>(token) >= trie.vocab_size) return false;
    const std::string& bytes = trie.token_bytes[token];
    if (bytes.empty()) return false;
    configuration next;
    if (!runner_.advance(history_.back(), bytes, next)) return false;
    history_.push_back(std::move(next));
    ended_.push_back(false);
    return true;
  }

  void rollback(std::size_t count) override {
    count = std::min(count, history_.size() - 1);
    history_.resize(history_.size() - count);
    ended_.resize(ended_.size() - count);
  }

  bool is_complete() const override { return ended_.back() || closed().complete; }

  bool is_terminated() const override {
    if (ended_.back()) return true;
    const auto& now = closed();
    return now.complete && now.live.empty();
  }

 private:
  static void set_bit(std::span<std::uint32_t> bits, std::int32_t id) {
    const auto word = static_cast<std::size_t>(id) / 32;
    if (id >= 0 && word < bits.size()) bits[word] |= 1u << (static_cast<std::uint32_t>(id) % 32);
  }

  const closed_configuration& closed() const {
    runner_.close(history_.back(), closed_);
    return closed_;
  }

  std::shared_ptr<const compiled_grammar> grammar_;
  mutable pushdown runner_;
  mutable closed_configuration closed_;
  std::vector<configuration> history_;
  std::vector<bool> ended_;
};

}  // namespace

compiled_grammar::compiled_grammar(automaton machine, std::shared_ptr<const vocab_trie> trie, std::size_t max_depth)
    : machine_(std::move(machine)),
      trie_(std::move(trie)),
      max_depth_(max_depth),
      representative_(machine_.size()),
      tables_(max_cached_tables) {
  std::iota(representative_.begin(), representative_.end(), 0);
}

void compiled_grammar::precompute(const compile_budget& budget, std::size_t max_tables) {
  if (max_tables == 0) return;
  representative_ = bounded_equivalent_states(machine_, trie_->max_token_bytes + 1, budget);
  for (const auto& request : reachable_table_keys(machine_, max_depth_, representative_, max_tables, budget)) {
    if (budget.expired()) break;
    tables_.get(machine_, *trie_, request.frames, request.depth_left);
    ++precomputed_;
  }
}

std::unique_ptr<token_matcher> compiled_grammar::start() const {
  return std::make_unique<pushdown_matcher>(shared_from_this());
}

std::shared_ptr<const token_table> compiled_grammar::table(std::vector<std::int32_t> frames,
                                                           std::size_t depth_left) const {
  frames[0] = representative_[static_cast<std::size_t>(frames[0])];
  return tables_.get(machine_, *trie_, frames, depth_left);
}

}  // namespace troupe::constraints
