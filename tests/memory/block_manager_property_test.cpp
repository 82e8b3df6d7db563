// Randomized operations against the block manager, with fixed seeds. Beside
// the manager's own invariants (reference counts equal table occupancy,
// every block free-or-owned, host slots owned once), the test keeps a shadow
// of what every device and host slot holds, runs each reply's copies and
// then writes each step's tokens the way an executor would, and checks that
// every sequence's table reads back exactly its tokens: prefix hits,
// copy-on-write, swaps and eviction never expose wrong K/V. Speculative
// appends write drafts into their unsettled slots; settles accept a random
// prefix of them, and every slot is flagged settled or not, so the test also
// checks that no cached block ever holds an unsettled or rejected draft.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "memory/block_manager.hpp"

namespace troupe {
namespace {

constexpr std::int32_t kBlockSize = 4;
constexpr std::int32_t kDeviceBlocks = 48;
constexpr std::int32_t kHostBlocks = 24;

struct model_sequence {
  std::vector<std::int32_t> tokens;  // settled tokens that have slots
  std::vector<std::int32_t> drafts;  // drafts written into the unsettled slots (a prefix of them)
  std::int32_t speculative = 0;      // unsettled slots after tokens
  std::vector<std::int32_t> table;   // device table rebuilt from the reply deltas
  bool swapped = false;

  void drop_speculative() {
    drafts.clear();
    speculative = 0;
  }
};

class shadow_run {
 public:
  explicit shadow_run(std::uint32_t seed) : rng_(seed) {
    block_manager_config config;
    config.block_size = kBlockSize;
    config.num_device_blocks = kDeviceBlocks;
    config.num_host_blocks = kHostBlocks;
    kv_ = std::make_unique<block_manager>(config);
    device_.assign(kDeviceBlocks * kBlockSize, -1);
    host_.assign(kHostBlocks * kBlockSize, -1);
    device_settled_.assign(device_.size(), false);
    host_settled_.assign(host_.size(), false);
    for (auto& doc : documents_) {
      doc.resize(24);
      for (auto& t : doc) t = pick(0, 40);
    }
  }

  void step() {
    kv_request request = random_request();
    const kv_reply reply = kv_->plan(request);
    ASSERT_EQ(kv_->check_invariants(), "");
    apply(request, reply);
    verify();
    verify_cache();
  }

  void drain() {
    kv_request request;
    for (const auto& [id, seq] : live_) request.frees.push_back({id, false});
    kv_->plan(request);
    live_.clear();
    EXPECT_EQ(kv_->usage().device_free_blocks, kDeviceBlocks);
    EXPECT_EQ(kv_->usage().host_free_blocks, kHostBlocks);
    EXPECT_EQ(kv_->check_invariants(), "");
  }

  std::uint64_t hits() const { return kv_->usage().prefix_hit_tokens; }
  int copies_seen = 0;
  int refusals_seen = 0;
  int settles_seen = 0;
  int rejected_drafts_seen = 0;

 private:
  std::int32_t pick(std::int32_t lo, std::int32_t hi) {
    return std::uniform_int_distribution<std::int32_t>(lo, hi)(rng_);
  }

  std::vector<std::int32_t> random_tokens(std::int32_t count) {
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(count));
    for (auto& t : tokens) t = pick(0, 40);
    return tokens;
  }

  // Settles about half the sequences with unsettled slots, accepting a
  // random prefix of the drafts written there.
  void random_settles(kv_request& request) {
    for (const auto& [id, seq] : live_) {
      if (seq.speculative == 0 || pick(0, 1) == 0) continue;
      const std::int32_t accepted = pick(0, static_cast<std::int32_t>(seq.drafts.size()));
      request.settles.push_back({id, accepted, {seq.drafts.begin(), seq.drafts.begin() + accepted}});
    }
  }

  void random_append(kv_request& request, sequence_id id) {
    if (pick(0, 2) != 0) return request.appends.push_back({id, random_tokens(pick(1, 6))});
    const std::int32_t speculative = pick(1, 5);
    request.appends.push_back({id, random_tokens(pick(1, 2)), speculative});
    drafts_to_write_[id] = random_tokens(pick(0, speculative));  // the proposer may fill fewer slots
  }

  kv_request random_request() {
    kv_request request;
    std::set<sequence_id> used;
    std::vector<sequence_id> ids;
    for (const auto& [id, seq] : live_) ids.push_back(id);
    std::shuffle(ids.begin(), ids.end(), rng_);
    drafts_to_write_.clear();
    random_settles(request);
    const auto settled = [&request](sequence_id id) {
      return std::any_of(request.settles.begin(), request.settles.end(),
                         [id](const kv_settle& s) { return s.seq == id; });
    };
    const int items = pick(1, 4);
    for (int i = 0; i < items; ++i) {
      int kind = pick(0, 9);
      if (kv_->usage().device_free_blocks < kDeviceBlocks / 8 && pick(0, 2) == 0) kind = 3;  // relieve pressure
      if (kind <= 1 || ids.empty()) {
        const auto& doc = documents_[static_cast<std::size_t>(pick(0, 3))];
        std::vector<std::int32_t> tokens(doc.begin(), doc.begin() + pick(0, 24));
        const auto suffix = random_tokens(pick(1, 10));
        tokens.insert(tokens.end(), suffix.begin(), suffix.end());
        const auto count = static_cast<std::int32_t>(tokens.size());
        request.allocations.push_back({next_id_++, std::move(tokens), pick(1, count), 0, pick(0, 5) != 0});
        continue;
      }
      const sequence_id id = ids[static_cast<std::size_t>(pick(0, static_cast<std::int32_t>(ids.size()) - 1))];
      const model_sequence& seq = live_.at(id);
      if (kind == 2 && !seq.swapped) {
        request.forks.push_back({id, next_id_++});
        continue;
      }
      if (!used.insert(id).second) continue;
      if (seq.tokens.size() > 48) kind = 3;  // finished: keeps the pool turning over
      if (kind == 3 || kind == 4) {
        request.frees.push_back({id, pick(0, 9) == 0});
      } else if (kind == 5 && !seq.swapped) {
        request.swap_outs.push_back({id});
      } else if (seq.swapped) {
        request.swap_ins.push_back({id, random_tokens(pick(0, 2))});
      } else if (seq.speculative == 0 || settled(id)) {
        random_append(request, id);
      }
    }
    return request;
  }

  void copy_block(const block_copy& c) {
    const bool from_device = c.from == block_location::device, to_device = c.to == block_location::device;
    const auto& from = from_device ? device_ : host_;
    auto& to = to_device ? device_ : host_;
    std::copy_n(from.begin() + c.src * kBlockSize, kBlockSize, to.begin() + c.dst * kBlockSize);
    const auto& from_settled = from_device ? device_settled_ : host_settled_;
    auto& to_settled = to_device ? device_settled_ : host_settled_;
    std::copy_n(from_settled.begin() + c.src * kBlockSize, kBlockSize, to_settled.begin() + c.dst * kBlockSize);
    ++copies_seen;
  }

  std::size_t device_slot(const model_sequence& seq, std::size_t pos) const {
    return static_cast<std::size_t>(seq.table.at(pos / kBlockSize) * kBlockSize +
                                    static_cast<std::int32_t>(pos % kBlockSize));
  }

  void write(model_sequence& seq, std::span<const std::int32_t> tokens) {
    for (std::int32_t t : tokens) {
      const std::size_t slot = device_slot(seq, seq.tokens.size());
      device_[slot] = t;
      device_settled_[slot] = true;
      seq.tokens.push_back(t);
    }
  }

  // The executor writes the drafts of a speculative append after its tokens.
  void write_drafts(model_sequence& seq, std::int32_t speculative, const std::vector<std::int32_t>& drafts) {
    seq.speculative = speculative;
    seq.drafts = drafts;
    for (std::size_t i = 0; i < drafts.size(); ++i) {
      const std::size_t slot = device_slot(seq, seq.tokens.size() + i);
      device_[slot] = drafts[i];
      device_settled_[slot] = false;
    }
  }

  void settle(model_sequence& seq, const kv_settle& op) {
    ++settles_seen;
    rejected_drafts_seen += static_cast<int>(seq.drafts.size()) - op.accepted;
    for (std::int32_t i = 0; i < op.accepted; ++i) {
      device_settled_[device_slot(seq, seq.tokens.size())] = true;
      seq.tokens.push_back(op.tokens[static_cast<std::size_t>(i)]);
    }
    seq.drop_speculative();
  }

  static bool refused(const kv_reply& reply, kv_op op, sequence_id id) {
    return std::any_of(reply.refused.begin(), reply.refused.end(),
                       [&](const kv_refused& r) { return r.op == op && r.seq == id; });
  }

  void apply(const kv_request& request, const kv_reply& reply) {
    refusals_seen += static_cast<int>(reply.refused.size());
    for (const auto& r : reply.refused) {
      ASSERT_TRUE(r.why == kv_refusal::no_device_blocks || r.why == kv_refusal::no_host_blocks)
          << "a well-formed item was refused as " << kv_refusal_name(r.why);
    }
    for (const auto& op : request.settles) settle(live_.at(op.seq), op);
    for (const auto& op : request.forks) {
      live_[op.child] = live_.at(op.parent);
      live_[op.child].drop_speculative();
    }
    for (const auto& op : request.frees) live_.erase(op.seq);
    for (const auto& op : request.swap_outs) {
      if (refused(reply, kv_op::swap_out, op.seq)) continue;
      live_.at(op.seq).swapped = true;
      live_.at(op.seq).drop_speculative();
    }
    for (const auto& op : request.swap_ins) {
      if (!refused(reply, kv_op::swap_in, op.seq)) live_.at(op.seq).swapped = false;
    }
    for (const kv_table_delta& d : reply.deltas) {
      const auto freed = [&](const kv_free& f) { return f.seq == d.seq; };
      if (std::any_of(request.frees.begin(), request.frees.end(), freed)) continue;  // a settle before its free
      auto& table = live_[d.seq].table;
      ASSERT_LE(static_cast<std::size_t>(d.keep), table.size());
      table.resize(static_cast<std::size_t>(d.keep));
      table.insert(table.end(), d.appended.begin(), d.appended.end());
    }
    for (const block_copy& c : reply.copies) copy_block(c);
    for (const auto& op : request.appends) {
      if (refused(reply, kv_op::append, op.seq)) continue;
      write(live_.at(op.seq), op.tokens);
      if (op.num_speculative > 0) write_drafts(live_.at(op.seq), op.num_speculative, drafts_to_write_.at(op.seq));
    }
    for (const auto& op : request.swap_ins) {
      if (!refused(reply, kv_op::swap_in, op.seq)) write(live_.at(op.seq), op.tokens);
    }
    for (const kv_allocated& a : reply.allocated) {
      const auto& op = *std::find_if(request.allocations.begin(), request.allocations.end(),
                                     [&](const kv_allocate& x) { return x.seq == a.seq; });
      ASSERT_EQ(a.cached_tokens % kBlockSize, 0);
      ASSERT_LT(a.cached_tokens, static_cast<std::int32_t>(op.tokens.size()));
      model_sequence& seq = live_[a.seq];
      seq.tokens.assign(op.tokens.begin(), op.tokens.begin() + a.cached_tokens);  // must already be there
      write(seq, std::span(op.tokens).subspan(static_cast<std::size_t>(a.cached_tokens),
                                              static_cast<std::size_t>(a.num_tokens - a.cached_tokens)));
    }
  }

  void verify() {
    for (const auto& [id, seq] : live_) {
      const auto actual = seq.swapped ? kv_->host_table(id) : kv_->block_table(id);
      if (!seq.swapped) {
        ASSERT_TRUE(std::equal(actual.begin(), actual.end(), seq.table.begin(), seq.table.end()));
      }
      ASSERT_EQ(kv_->num_tokens(id), static_cast<std::int32_t>(seq.tokens.size()));
      ASSERT_EQ(kv_->num_speculative(id), seq.speculative);
      const auto& memory = seq.swapped ? host_ : device_;
      for (std::size_t p = 0; p < seq.tokens.size(); ++p) {
        const std::int32_t slot = actual[p / kBlockSize] * kBlockSize + static_cast<std::int32_t>(p % kBlockSize);
        ASSERT_EQ(memory[static_cast<std::size_t>(slot)], seq.tokens[p])
            << "sequence " << id << " position " << p << (seq.swapped ? " (host)" : " (device)");
      }
    }
  }

  // Every cached block holds, in every slot, the settled token it was indexed with.
  void verify_cache() const {
    const device_block_pool& pool = kv_->device_pool();
    for (std::int32_t b = 0; b < pool.num_blocks(); ++b) {
      const auto tokens = pool.cached_tokens(b);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const auto slot = static_cast<std::size_t>(b * kBlockSize) + i;
        ASSERT_TRUE(device_settled_[slot]) << "cached block " << b << " holds an unsettled or rejected draft";
        ASSERT_EQ(device_[slot], tokens[i]) << "cached block " << b << " slot " << i;
      }
    }
  }

  std::mt19937 rng_;
  std::unique_ptr<block_manager> kv_;
  std::vector<std::int32_t> device_, host_;
  std::vector<bool> device_settled_, host_settled_;                   // the slot holds a settled token (not a draft)
  std::map<sequence_id, std::vector<std::int32_t>> drafts_to_write_;  // by the appends of the request being built
  std::map<sequence_id, model_sequence> live_;
  std::array<std::vector<std::int32_t>, 4> documents_;
  sequence_id next_id_ = 1;
};

class BlockManagerProperty : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(BlockManagerProperty, RandomOperationsKeepTablesAndContentsConsistent) {
  shadow_run run(GetParam());
  for (int i = 0; i < 5000; ++i) {
    ASSERT_NO_FATAL_FAILURE(run.step()) << "operation batch " << i;
  }
  EXPECT_GT(run.hits(), 0u) << "the workload should exercise prefix hits";
  EXPECT_GT(run.copies_seen, 0) << "the workload should exercise copies";
  EXPECT_GT(run.refusals_seen, 0) << "the workload should exercise items that do not fit";
  EXPECT_GT(run.settles_seen, 0) << "the workload should exercise settles";
  EXPECT_GT(run.rejected_drafts_seen, 0) << "the workload should exercise rejected drafts";
  run.drain();
}

INSTANTIATE_TEST_SUITE_P(Seeds, BlockManagerProperty, ::testing::Values(1u, 2u, 3u, 20261122u));

}  // namespace
}  // namespace troupe
