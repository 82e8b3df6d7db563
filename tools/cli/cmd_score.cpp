// `troupe score`: the full logits of a prompt as a NumPy file, and its perplexity.

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "model/batch_runner.hpp"
#include "model/npy.hpp"
#include "tools/cli/cli_model.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

struct score_flags {
  model_flags model;
  std::string prompt;
  std::string prompt_ids;
  std::string logits_npy;
  int chunk = 512;
};

// Mean negative log-likelihood of each next token under the logits of the position before it.
double mean_next_token_nll(const std::vector<float>& logits, const std::vector<std::int32_t>& ids, std::size_t vocab) {
  double total = 0.0;
  for (std::size_t t = 0; t + 1 < ids.size(); ++t) {
    const float* row = logits.data() + t * vocab;
    double max_logit = row[0];
    for (std::size_t v = 1; v < vocab; ++v) max_logit = std::max(max_logit, static_cast<double>(row[v]));
    double sum = 0.0;
    for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - max_logit);
    total += max_logit + std::log(sum) - row[static_cast<std::size_t>(ids[t + 1])];
  }
  return ids.size() > 1 ? total / static_cast<double>(ids.size() - 1) : 0.0;
}

void run(const score_flags& flags) {
  loaded_model loaded = load_model(flags.model);
  std::vector<std::int32_t> ids;
  if (!flags.prompt_ids.empty()) {
    ids = parse_id_list(flags.prompt_ids, "--prompt-ids");
  } else if (!flags.prompt.empty()) {
    if (!loaded.tokenizer) throw std::runtime_error(loaded.dir.string() + ": no tokenizer.json; use --prompt-ids");
    ids = loaded.tokenizer->encode(flags.prompt, true);
  } else {
    throw std::runtime_error("give --prompt or --prompt-ids");
  }
  const auto vocab = static_cast<std::size_t>(loaded.model->vocab_size());
  for (auto id : ids) {
    if (static_cast<std::size_t>(id) >= vocab)
      throw std::runtime_error("--prompt-ids: token id " + std::to_string(id) + " is outside the vocabulary");
  }
  batch_runner runner(*loaded.model, runner_options{});
  const std::vector<float> logits = runner.prompt_logits({ids}, flags.chunk)[0];
  if (!flags.logits_npy.empty()) {
    write_npy(flags.logits_npy, {static_cast<std::int64_t>(ids.size()), static_cast<std::int64_t>(vocab)},
              logits.data());
  }
  const double nll = mean_next_token_nll(logits, ids, vocab);
  std::cout << "tokens " << ids.size() << "  mean_nll " << nll << "  perplexity " << std::exp(nll) << "\n";
}

void setup(CLI::App& root) {
  auto flags = std::make_shared<score_flags>();
  CLI::App* cmd = root.add_subcommand("score", "full logits of a prompt (and its perplexity)");
  add_model_flags(*cmd, flags->model);
  cmd->add_option("--prompt", flags->prompt, "prompt text (tokenized with special tokens)");
  cmd->add_option("--prompt-ids", flags->prompt_ids, "prompt as comma-separated token ids");
  cmd->add_option("--logits-npy", flags->logits_npy, "write float32 logits [n_tokens, vocab] to this .npy file");
  cmd->add_option("--chunk", flags->chunk, "prompt tokens per step")->check(CLI::PositiveNumber);
  cmd->callback([flags] { run(*flags); });
}

const bool registered = register_command("score", setup);

}  // namespace
}  // namespace troupe::cli
