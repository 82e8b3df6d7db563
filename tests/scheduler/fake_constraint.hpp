#pragma once
// A test double of a compiled constraint: position t of the document allows
// the ids of steps[t], and the document is complete (and over) after the
// last step. Its matcher counts the calls the scheduler makes, so tests see
// that masks are filled per row and that rollbacks undo the drafts.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "constraints/constraint.hpp"

namespace troupe::testing {

/// The ids of a mask, ascending.
inline std::vector<std::int32_t> mask_ids(std::span<const std::uint32_t> mask) {
  std::vector<std::int32_t> ids;
  for (std::size_t w = 0; w < mask.size(); ++w) {
    for (std::uint32_t b = 0; b < 32; ++b) {
      if ((mask[w] >> b) & 1u) ids.push_back(static_cast<std::int32_t>(w * 32 + b));
    }
  }
  return ids;
}

/// What the fake model draws under a mask: the (token % count)-th allowed id.
inline std::int32_t constrained_token(std::int32_t token, const std::vector<std::int32_t>& allowed) {
  if (allowed.empty()) return token;
  return allowed[static_cast<std::size_t>(token) % allowed.size()];
}

class positional_matcher final : public constraints::token_matcher {
 public:
  explicit positional_matcher(const std::vector<std::set<std::int32_t>>& steps) : steps_(steps) {}
  void fill_allowed(std::span<std::uint32_t> allowed) const override {
    std::fill(allowed.begin(), allowed.end(), 0u);
    if (accepted_.size() >= steps_.size()) return;
    for (std::int32_t id : steps_[accepted_.size()]) allowed[static_cast<std::size_t>(id / 32)] |= 1u << (id % 32);
  }
  bool accept_token(std::int32_t token) override {
    if (accepted_.size() >= steps_.size() || !steps_[accepted_.size()].contains(token)) return false;
    accepted_.push_back(token);
    return true;
  }
  void rollback(std::size_t count) override { accepted_.resize(accepted_.size() - count); }
  bool is_complete() const override { return accepted_.size() == steps_.size(); }
  bool is_terminated() const override { return is_complete(); }

 private:
  const std::vector<std::set<std::int32_t>>& steps_;
  std::vector<std::int32_t> accepted_;
};

/// Allows the documents whose token t is in steps[t], of exactly steps.size() tokens.
class positional_constraint final : public constraints::compiled_constraint {
 public:
  explicit positional_constraint(std::vector<std::set<std::int32_t>> steps) : steps(std::move(steps)) {}
  std::unique_ptr<constraints::token_matcher> start() const override {
    return std::make_unique<positional_matcher>(steps);
  }
  /// Whether `tokens` is a complete document.
  bool accepts(const std::vector<std::int32_t>& tokens) const {
    if (tokens.size() != steps.size()) return false;
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      if (!steps[t].contains(tokens[t])) return false;
    }
    return true;
  }
  std::vector<std::set<std::int32_t>> steps;
};

/// A constraint of `length` positions, each allowing `width` ids spread over [0, vocab).
inline std::shared_ptr<const positional_constraint> spread_constraint(int length, int width, std::int32_t vocab,
                                                                      std::int32_t salt = 0) {
  std::vector<std::set<std::int32_t>> steps(static_cast<std::size_t>(length));
  for (int t = 0; t < length; ++t) {
    for (int k = 0; k < width; ++k)
      steps[static_cast<std::size_t>(t)].insert((salt + t * 37 + k * 101 + k * k * 7) % vocab);
  }
  return std::make_shared<const positional_constraint>(std::move(steps));
}

}  // namespace troupe::testing
