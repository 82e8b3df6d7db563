// `troupe bench-actors`: the troupe's own cost per step — scheduling, the KV
// plan round trip, messaging, detokenization and event delivery — with an
// executor that answers instantly, so no model compute is in the numbers.

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <stdexcept>
#include <string>

#include "actors/detokenizer_actor.hpp"
#include "actors/kv_manager_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/troupe.hpp"
#include "model/demo_model.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

struct bench_actors_flags {
  int sequences = 256;
  int prompt_tokens = 16;
  int steps = 2000;
  int tokenizer_workers = engine_config{}.tokenizer_workers;
  std::string model_dir;
};

// Answers every step at once with token 100 for each logits row.
executor_actor::behavior_type instant_executor(executor_actor::pointer self, std::shared_ptr<std::atomic<int>> steps) {
  return {
      [steps](atom::run_step, const step_work_ptr& step) -> step_result_ptr {
        auto result = std::make_shared<step_result>();
        result->step = step->id;
        result->samples.resize(step->rows.size());
        for (auto& sample : result->samples) sample.token = 100;
        ++*steps;
        return result;
      },
      [](atom::propose, const draft_request_ptr&) -> caf::result<draft_reply_ptr> {
        return caf::make_error(caf::sec::unexpected_message, "not a drafter's executor");
      },
      [self](atom::fail) { self->quit(); },
  };
}

struct counting_sink final : request_sink {
  std::atomic<std::int64_t>& deltas;
  explicit counting_sink(std::atomic<std::int64_t>& counter) : deltas(counter) {}
  void on_accepted(const accepted_event&) override {}
  void on_delta(const delta_event&) override { ++deltas; }
  void on_finished(const finished_event&) override {}
  void on_error(const error_event& e) override { std::cerr << "error: " << e.message << "\n"; }
};

void run(const bench_actors_flags& flags) {
  const auto dir = flags.model_dir.empty() ? ensure_demo_model() : std::filesystem::path(flags.model_dir);
  auto preparer = prompt_preparer::load(dir);
  caf::actor_system_config cfg;
  add_troupe_message_types(cfg);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system system{cfg};
  auto executed = std::make_shared<std::atomic<int>>(0);
  std::atomic<std::int64_t> deltas{0};

  scheduler_setup setup;
  setup.loop.scheduler.max_num_seqs = flags.sequences;
  setup.loop.scheduler.max_num_batched_tokens =
      std::max(setup.loop.scheduler.max_num_batched_tokens, flags.sequences * 2);
  // Every request outlives the timed steps: the warm-up steps come first,
  // 10 or however many more run while this thread sleeps (at 20 us a step,
  // a 1 ms sleep stretched by a busy machine lets hundreds through), and
  // one sequence alone is never split into two half steps.
  const int max_tokens = 2 * flags.steps + 1024;
  setup.loop.scheduler.max_model_len = flags.prompt_tokens + max_tokens + 64;
  const std::int32_t blocks_per_seq = setup.loop.scheduler.max_model_len / setup.loop.scheduler.block_size + 2;
  setup.loop.scheduler.num_device_blocks = blocks_per_seq * flags.sequences;
  setup.kv = spawn_kv_manager(system, kv_manager_config(setup.loop.scheduler));
  setup.executor = system.spawn(instant_executor, executed);
  for (int i = 0; i < flags.tokenizer_workers; ++i)
    setup.shards.push_back(spawn_detokenizer(system, {preparer->tokenizer()}));
  const auto start = std::chrono::steady_clock::now();
  auto scheduler = spawn_scheduler(system, setup, start);

  for (int i = 0; i < flags.sequences; ++i) {
    auto admitted = std::make_shared<admitted_request>();
    admitted->spec.request_id = "bench-" + std::to_string(i);
    admitted->spec.prompt.assign(static_cast<std::size_t>(flags.prompt_tokens), 65 + i % 26);
    admitted->spec.max_tokens = max_tokens;
    admitted->spec.ignore_eos = true;
    admitted->spec.sampling.temperature = 0.0f;
    admitted->sink = event_sink::from_callbacks(std::make_shared<counting_sink>(deltas));
    admitted->accepted.request_id = admitted->spec.request_id;
    caf::anon_send(scheduler, atom::submit_v, admitted_request_ptr{std::move(admitted)});
  }
  // Let the prompts prefill, then time full decode steps.
  while (*executed < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int first = *executed;
  const auto t0 = std::chrono::steady_clock::now();
  const auto cpu0 = std::clock();
  // A stalled engine must not hang the benchmark: give up after 10 s
  // without a step.
  int seen = first;
  auto last_progress = std::chrono::steady_clock::now();
  while (*executed < first + flags.steps) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const auto now = std::chrono::steady_clock::now();
    if (*executed != seen) {
      seen = *executed;
      last_progress = now;
    } else if (now - last_progress > std::chrono::seconds(10)) {
      break;
    }
  }
  const int timed = *executed - first;
  const bool stalled = timed < flags.steps;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto shut_down = [&] {
    caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
    caf::anon_send(setup.executor, atom::fail_v);
    caf::anon_send_exit(setup.kv, caf::exit_reason::user_shutdown);
    for (auto& shard : setup.shards) caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  };
  if (stalled) {
    shut_down();
    throw std::runtime_error("bench-actors: no step for 10 s after " + std::to_string(seen - first) + " of " +
                             std::to_string(flags.steps) + " timed steps");
  }
  const double cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  const double per_step_us = 1e6 * wall / timed;
  std::cout << std::fixed << std::setprecision(1) << "sequences " << flags.sequences << ", steps " << timed << ": "
            << per_step_us << " us per step wall (" << 1e6 * cpu / timed << " us CPU per step, all threads), "
            << static_cast<double>(deltas.load()) / wall / 1e3 << "k token events/s\n";
  shut_down();
}

void setup(CLI::App& root) {
  auto flags = std::make_shared<bench_actors_flags>();
  CLI::App* cmd = root.add_subcommand("bench-actors", "scheduling + messaging cost per step, no model compute");
  cmd->add_option("--sequences", flags->sequences, "running sequences")->check(CLI::Range(1, 65536));
  cmd->add_option("--prompt-tokens", flags->prompt_tokens, "prompt length of each")->check(CLI::PositiveNumber);
  cmd->add_option("--steps", flags->steps, "decode steps to time")->check(CLI::PositiveNumber);
  cmd->add_option("--tokenizer-workers", flags->tokenizer_workers, "output shards")->check(CLI::Range(1, 64));
  cmd->add_option("--model", flags->model_dir, "model directory for the tokenizer (default: demo model)");
  cmd->callback([flags] { run(*flags); });
}

const bool registered = register_command("bench-actors", setup);

}  // namespace
}  // namespace troupe::cli
