#pragma once
// A fake draft model for the draft proposer's tests: a real paged cache of
// token ids, so a round that trusted the wrong cache contents drafts the
// wrong chain; and the jobs and expectations the tests build.

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <span>
#include <vector>

#include "actors/core/draft_proposer.hpp"

namespace troupe::testing {

constexpr std::int32_t kBlockSize = 4;
constexpr std::int64_t kVocab = 50;
constexpr std::int32_t kBlocks = 64;

// The fake draft model: the next token after a context is a fixed function
// of the whole context, read from the paged cache through the block table.
class fake_draft_model {
 public:
  fake_draft_model() : slots_(static_cast<std::size_t>(kBlocks * kBlockSize), -1) {}

  static std::int32_t next_after(std::span<const std::int32_t> context) {
    std::int64_t h = 17;
    for (std::size_t i = 0; i < context.size(); ++i)
      h = (h * 31 + context[i] * 7 + static_cast<std::int64_t>(i)) % 9973;
    return static_cast<std::int32_t>(h % kVocab);
  }

  /// Writes the step's tokens into the cache and returns each row's logits (a peak at next_after).
  std::vector<float> run(const scheduled_step& step) {
    ++steps;
    std::vector<float> logits;
    for (const scheduled_sequence& seq : step.sequences) {
      for (std::size_t i = 0; i < seq.tokens.size(); ++i) {
        slot(seq.block_table, seq.start + static_cast<std::int32_t>(i)) = seq.tokens[i];
        ++tokens_fed;
      }
      const std::int32_t last = seq.start + static_cast<std::int32_t>(seq.tokens.size()) - 1;
      std::vector<std::int32_t> context;
      for (std::int32_t pos = 0; pos <= last; ++pos) context.push_back(slot(seq.block_table, pos));
      std::vector<float> row(static_cast<std::size_t>(kVocab));
      for (std::int64_t v = 0; v < kVocab; ++v)
        row[static_cast<std::size_t>(v)] = std::sin(0.3f * static_cast<float>(v));
      row[static_cast<std::size_t>(next_after(context))] = 10.0f;
      logits.insert(logits.end(), row.begin(), row.end());
    }
    return logits;
  }

  std::int32_t& slot(const std::vector<std::int32_t>& table, std::int32_t pos) {
    return slots_[static_cast<std::size_t>(table[static_cast<std::size_t>(pos / kBlockSize)] * kBlockSize +
                                           pos % kBlockSize)];
  }

  int steps = 0;
  int tokens_fed = 0;

 private:
  std::vector<std::int32_t> slots_;
};

inline draft_job greedy_job(sequence_id seq, std::vector<std::int32_t> tokens, std::int32_t slots,
                            std::vector<std::int32_t> blocks) {
  draft_job job;
  job.seq = seq;
  job.tokens = std::move(tokens);
  job.prompt_length = 2;
  job.slots = slots;
  job.block_table = std::move(blocks);
  job.params.temperature = 0.0f;
  return job;
}

inline std::vector<std::int32_t> blocks_from(std::int32_t first, int count) {
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(count));
  std::iota(blocks.begin(), blocks.end(), first);
  return blocks;
}

// What the drafts must be: the model's greedy chain on the true context.
inline std::vector<std::int32_t> expected_chain(std::vector<std::int32_t> context, int count) {
  std::vector<std::int32_t> chain;
  for (int i = 0; i < count; ++i) {
    chain.push_back(fake_draft_model::next_after(context));
    context.push_back(chain.back());
  }
  return chain;
}

inline draft_reply run_round(draft_proposer& proposer, fake_draft_model& model, draft_request request) {
  return proposer.run_round(std::move(request), [&model](const scheduled_step& step) {
    EXPECT_TRUE(step.logits_only);
    return model.run(step);
  });
}

}  // namespace troupe::testing
