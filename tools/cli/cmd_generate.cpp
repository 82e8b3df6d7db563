// `troupe generate`: offline batched generation for one or more prompts.

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <iostream>
#include <optional>
#include <random>

#include "model/batch_runner.hpp"
#include "tools/cli/cli_model.hpp"
#include "tools/cli/command_registry.hpp"
#include "tools/cli/generate_flags.hpp"

namespace troupe::cli {

sampling_params sampling_from(const generate_flags& flags, const generation_config& defaults) {
  sampling_params p;
  const bool greedy_by_default = defaults.do_sample.has_value() && !*defaults.do_sample;
  p.temperature =
      flags.temperature.value_or(greedy_by_default ? 0.0f : static_cast<float>(defaults.temperature.value_or(1.0)));
  p.top_p = flags.top_p.value_or(static_cast<float>(defaults.top_p.value_or(1.0)));
  p.top_k = flags.top_k.value_or(static_cast<int>(defaults.top_k.value_or(0)));
  p.min_p = flags.min_p.value_or(static_cast<float>(defaults.min_p.value_or(0.0)));
  p.repetition_penalty =
      flags.repetition_penalty.value_or(static_cast<float>(defaults.repetition_penalty.value_or(1.0)));
  p.presence_penalty = flags.presence_penalty;
  p.frequency_penalty = flags.frequency_penalty;
  p.logprobs = flags.logprobs >= 0;
  p.top_logprobs = std::max(flags.logprobs, 0);
  return p;
}

namespace {

std::vector<std::int32_t> eos_ids(const loaded_model& loaded) {
  std::vector<std::int32_t> ids;
  const auto& from_generation = loaded.ckpt.generation().eos_token_ids;
  const auto& source = from_generation.empty() ? loaded.ckpt.config().eos_token_ids : from_generation;
  for (auto id : source) ids.push_back(static_cast<std::int32_t>(id));
  if (ids.empty() && loaded.tokenizer && loaded.tokenizer->eos_token() && loaded.tokenizer->eos_token()->id)
    ids.push_back(*loaded.tokenizer->eos_token()->id);
  return ids;
}

std::vector<runner_request> build_requests(const generate_flags& flags, const loaded_model& loaded) {
  std::vector<std::vector<std::int32_t>> prompts;
  for (const auto& text : flags.prompts) {
    if (!loaded.tokenizer) throw std::runtime_error(loaded.dir.string() + ": no tokenizer.json; use --prompt-ids");
    prompts.push_back(loaded.tokenizer->encode(text, true));
  }
  for (const auto& ids : flags.prompt_ids) prompts.push_back(parse_id_list(ids, "--prompt-ids"));
  if (prompts.empty()) throw std::runtime_error("give at least one --prompt or --prompt-ids");
  std::vector<std::int32_t> stops = flags.ignore_eos ? std::vector<std::int32_t>{} : eos_ids(loaded);
  if (!flags.stop_token_ids.empty()) {
    const auto extra = parse_id_list(flags.stop_token_ids, "--stop-token-ids");
    stops.insert(stops.end(), extra.begin(), extra.end());
  }
  const sampling_params params = sampling_from(flags, loaded.ckpt.generation());
  const std::uint64_t seed = flags.seed.value_or(std::random_device{}());
  std::vector<runner_request> requests;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const std::int64_t vocab = loaded.model->vocab_size();
    for (auto id : prompts[i]) {
      if (id >= vocab)
        throw std::runtime_error("--prompt-ids: token id " + std::to_string(id) + " is outside the vocabulary");
    }
    requests.push_back(runner_request{prompts[i], params, seed + i, flags.max_tokens, flags.min_tokens, stops});
  }
  return requests;
}

std::string text_of(const loaded_model& loaded, const std::vector<std::int32_t>& ids) {
  return loaded.tokenizer ? loaded.tokenizer->decode(ids, true) : std::string();
}

void print_json(const loaded_model& loaded, const runner_request& request, const runner_result& result) {
  boost::json::object out;
  out["prompt_ids"] = boost::json::value_from(request.prompt);
  out["token_ids"] = boost::json::value_from(result.tokens);
  out["text"] = text_of(loaded, result.tokens);
  out["finish_reason"] = result.stopped ? "stop" : "length";
  if (request.params.logprobs) {
    boost::json::array logprobs;
    for (const auto& sample : result.samples) logprobs.push_back(sample.logprob);
    out["logprobs"] = std::move(logprobs);
  }
  std::cout << boost::json::serialize(out) << "\n";
}

void run(const generate_flags& flags) {
  if (flags.engine || flags.speculation.speculative != "off") return generate_with_engine(flags);
  loaded_model loaded = load_model(flags.model);
  const std::vector<runner_request> requests = build_requests(flags, loaded);
  batch_runner runner(*loaded.model, runner_options{});
  const std::vector<runner_result> results = runner.generate(requests);
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (flags.json) {
      print_json(loaded, requests[i], results[i]);
    } else if (!loaded.tokenizer) {
      std::cout << boost::json::serialize(boost::json::value_from(results[i].tokens)) << "\n";
    } else {
      if (results.size() > 1) std::cout << "[" << i << "] ";
      std::cout << text_of(loaded, results[i].tokens) << "\n";
    }
  }
}

void setup(CLI::App& root) {
  auto flags = std::make_shared<generate_flags>();
  CLI::App* cmd = root.add_subcommand("generate", "generate text for prompts (batched, offline)");
  add_model_flags(*cmd, flags->model);
  cmd->add_option("--prompt", flags->prompts, "prompt text (repeat for several prompts)");
  cmd->add_option("--prompt-ids", flags->prompt_ids, "prompt as comma-separated token ids (repeatable)");
  cmd->add_option("--max-tokens", flags->max_tokens, "tokens to generate at most")->check(CLI::PositiveNumber);
  cmd->add_option("--min-tokens", flags->min_tokens, "tokens to generate before eos may end")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", flags->temperature, "0 is greedy")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-p", flags->top_p, "nucleus mass in (0, 1]")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", flags->top_k, "keep the k most likely tokens (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-p", flags->min_p, "drop tokens below min_p x the top probability")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repetition-penalty", flags->repetition_penalty, "> 0; 1 disables")->check(CLI::Range(0.01, 100.0));
  cmd->add_option("--presence-penalty", flags->presence_penalty, "[-2, 2]")->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--frequency-penalty", flags->frequency_penalty, "[-2, 2]")->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--seed", flags->seed, "seed of the first prompt (prompt i uses seed + i)");
  cmd->add_flag("--ignore-eos", flags->ignore_eos, "keep generating past eos");
  cmd->add_option("--stop-token-ids", flags->stop_token_ids, "extra comma-separated ids that end generation");
  cmd->add_option("--logprobs", flags->logprobs, "report logprobs (and this many alternatives)")
      ->check(CLI::Range(0, 20));
  cmd->add_flag("--json", flags->json, "one JSON object per prompt");
  cmd->add_flag("--engine", flags->engine,
                "run through the embedded engine (implied by --speculative); speed on stderr");
  cmd->add_flag("--batch-invariant", flags->batch_invariant,
                "engine path: outputs independent of what shares a step (see docs/operations.md)");
  cmd->add_option("--speculative", flags->speculation.speculative,
                  "off, ngram, draft or layerskip (other than off: the prompts run through the engine)");
  cmd->add_option("--num-speculative-tokens", flags->speculation.num_speculative_tokens,
                  "drafts per sequence and step at most (default 4 here)");
  cmd->add_option("--draft-model", flags->speculation.draft_model, "draft: HF directory (default: the demo draft)");
  cmd->add_option("--draft-quantization", flags->speculation.draft_quantization,
                  "draft: auto (as --quantization), none, int8, int4, int4_asym, int5_asym, int4_nl, int6 or int4_g16");
  cmd->add_option("--draft-vocab-size", flags->speculation.draft_vocab_size,
                  "draft: its LM head scores only the ids below this (default 0: every id)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--speculative-skip-layers", flags->speculation.speculative_skip_layers,
                  "layerskip: layers skipped, e.g. 4-7 or 1,3,5 (default: the upper half)");
  cmd->add_option("--speculative-tree-width", flags->speculation.speculative_tree_width,
                  "draft tree branches verified at once (ngram: other matches; draft: runners-up of the first "
                  "draft; default 1: chains)")
      ->check(CLI::Range(1, 8));
  cmd->add_option("--draft-threads", flags->speculation.draft_threads,
                  "draft, layerskip: the drafter's CPU threads (default 0: as many as --threads)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--speculative-draft-ahead", flags->speculation.speculative_draft_ahead,
                  "draft, layerskip: draft the next round while the target verifies: auto (where the drafter has "
                  "cores of its own), on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--speculative-turn-down", flags->speculation.speculative_turn_down,
                  "speculate only where the measured costs say it pays (default true; false: every decode "
                  "speculates, to measure a proposer alone)");
  cmd->callback([flags] { run(*flags); });
}

const bool registered = register_command("generate", setup);

}  // namespace
}  // namespace troupe::cli
