// `troupe make-model`: writes a random-weight checkpoint in the Hugging Face
// layout (see model/make_model.hpp).

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "model/make_model.hpp"
#include "tools/cli/command_registry.hpp"

namespace {

struct make_model_arguments {
  std::string arch = "llama";
  std::string preset = "tiny";
  std::string type = "f32";
  std::uint64_t seed = 0;
  std::string out;
  std::string tokenizer;
  std::uint64_t max_shard_bytes = 4'000'000'000;
};

troupe::make_model_options to_options(const make_model_arguments& args) {
  troupe::make_model_options options;
  const auto arch = troupe::parse_architecture(args.arch);
  if (!arch)
    throw std::runtime_error("--arch: unknown architecture '" + args.arch + "' (llama, mistral, qwen2, qwen3)");
  const auto preset = troupe::parse_model_preset(args.preset);
  if (!preset) throw std::runtime_error("--preset: unknown preset '" + args.preset + "' (tiny, small, 1b, 8b)");
  const auto type = troupe::parse_dtype(args.type);
  if (!type) throw std::runtime_error("--dtype: unknown dtype '" + args.type + "' (f32, bf16, f16)");
  if (args.max_shard_bytes == 0) throw std::runtime_error("--max-shard-bytes must be positive");
  options.architecture = *arch;
  options.preset = *preset;
  options.type = *type;
  options.seed = args.seed;
  options.output_dir = args.out;
  if (!args.tokenizer.empty()) options.tokenizer_dir = args.tokenizer;
  options.max_shard_bytes = args.max_shard_bytes;
  return options;
}

void setup(CLI::App& root) {
  auto args = std::make_shared<make_model_arguments>();
  CLI::App* command = root.add_subcommand("make-model", "Write a random-weight checkpoint in the Hugging Face layout");
  command->add_option("--arch", args->arch, "Architecture: llama, mistral, qwen2, qwen3")->capture_default_str();
  command->add_option("--preset", args->preset, "Size: tiny, small, 1b (Llama-3.2-1B shapes), 8b (Llama-3.1-8B)")
      ->capture_default_str();
  command->add_option("--dtype", args->type, "Weight type: f32, bf16, f16")->capture_default_str();
  command->add_option("--seed", args->seed, "Seed of the random weights")->capture_default_str();
  command->add_option("--out", args->out, "Output directory (must not exist, or be empty)")->required();
  command->add_option("--tokenizer", args->tokenizer,
                      "Copy tokenizer.json, tokenizer_config.json, chat_template.jinja from this directory "
                      "(default: the built-in byte-level BPE tokenizer)");
  command->add_option("--max-shard-bytes", args->max_shard_bytes, "Split the weights into shards of at most this size")
      ->capture_default_str();
  command->callback([args] {
    troupe::make_model(to_options(*args));
    std::printf("wrote %s\n", args->out.c_str());
  });
}

const bool registered = troupe::cli::register_command("make-model", setup);

}  // namespace
