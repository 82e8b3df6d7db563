// `troupe bench`: prefill and decode speed of a model on this machine, and
// decode's effective memory bandwidth next to the measured copy bandwidth
// (../shared/BENCHMARKS.md workloads W1 and W2, offline, no server).

#include <CLI/CLI.hpp>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>

#include "kernels/cpu/copy_bandwidth.hpp"
#include "model/batch_runner.hpp"
#include "tools/cli/cli_model.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

struct bench_flags {
  model_flags model;
  int prompt_len = 512;
  std::string batches = "1,8,32";
  int decode_prompt_len = 128;
  int decode_tokens = 64;
  std::string verify_tokens;  ///< comma-separated tokens per verify step (empty: none)
};

struct decode_result {
  int batch = 0;
  double step_ms = 0.0;
  double tokens_per_s = 0.0;
  double bandwidth_gbps = 0.0;
};

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

std::vector<std::int32_t> random_prompt(int length, std::int64_t vocab, std::mt19937& rng) {
  std::uniform_int_distribution<std::int64_t> id(0, vocab - 1);
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(length));
  for (auto& t : prompt) t = static_cast<std::int32_t>(id(rng));
  return prompt;
}

runner_request bench_request(std::vector<std::int32_t> prompt, int max_tokens) {
  runner_request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0.0f;
  r.max_tokens = max_tokens;
  return r;
}

double measure_prefill(llama_model& model, int prompt_len, std::mt19937& rng) {
  runner_options options;
  options.max_chunk_tokens = prompt_len;
  options.max_step_tokens = prompt_len;
  batch_runner warmup(model, options);
  warmup.generate({bench_request(random_prompt(std::min(prompt_len, 64), model.vocab_size(), rng), 1)});
  batch_runner runner(model, options);
  runner.generate({bench_request(random_prompt(prompt_len, model.vocab_size(), rng), 1)});
  double seconds = 0.0;
  for (const auto& step : runner.history()) seconds += step.seconds;
  return prompt_len / seconds;
}

/// Bytes of weights a decode step reads: the checkpoint's, or with
/// quantization the backend's copies of the linear layers and the LM head.
double streamed_weight_bytes(const loaded_model& loaded) {
  if (loaded.quantization == weight_quantization::none) return static_cast<double>(loaded.ckpt.weight_bytes());
  return static_cast<double>(loaded.model->linear_weight_bytes());
}

decode_result measure_decode(const loaded_model& loaded, const bench_flags& flags, int batch, std::mt19937& rng) {
  llama_model& model = *loaded.model;
  std::vector<runner_request> requests;
  for (int i = 0; i < batch; ++i)
    requests.push_back(
        bench_request(random_prompt(flags.decode_prompt_len, model.vocab_size(), rng), flags.decode_tokens));
  runner_options options;
  options.max_step_tokens = std::max(2048, flags.decode_prompt_len);
  batch_runner runner(model, options);
  runner.generate(requests);
  const dtype kv = default_kv_type(model.config().torch_dtype, model.device());
  const double kv_bytes_per_token = static_cast<double>(model.kv_block_bytes(1, kv));
  const double weight_bytes = streamed_weight_bytes(loaded);
  double seconds = 0.0, bytes = 0.0;
  int steps = 0;
  bool first_decode = true;
  for (const auto& step : runner.history()) {
    if (step.tokens != step.sequences || step.sequences != batch) continue;  // prefill or ragged tail
    if (first_decode) {  // the first decode step warms caches; not counted
      first_decode = false;
      continue;
    }
    seconds += step.seconds;
    bytes += weight_bytes + kv_bytes_per_token * static_cast<double>(step.context_tokens);
    ++steps;
  }
  if (steps == 0) throw std::runtime_error("bench: no full decode steps; raise --decode-tokens");
  const double step_s = seconds / steps;
  return {batch, step_s * 1e3, batch / step_s, bytes / seconds / 1e9};
}

/// A speculative verify step of one sequence: `tokens` fed with a logits
/// row each (the last accepted token and its drafts), at the decode prompt
/// length and beyond. Returns its time in seconds.
double measure_verify_step(llama_model& model, const bench_flags& flags, int tokens, std::mt19937& rng) {
  const int length = flags.decode_prompt_len + flags.decode_tokens * tokens;
  batch_runner runner(model, runner_options{});
  runner.prompt_logits({random_prompt(length, model.vocab_size(), rng)}, tokens);
  double seconds = 0.0;
  int steps = 0;
  bool first = true;
  for (const auto& step : runner.history()) {
    if (step.tokens != tokens || step.context_tokens <= flags.decode_prompt_len) continue;
    if (first) {  // the first warms caches; not counted
      first = false;
      continue;
    }
    seconds += step.seconds;
    ++steps;
  }
  if (steps == 0) throw std::runtime_error("bench: no verify steps; raise --decode-tokens");
  return seconds / steps;
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::ostringstream out;
  out << std::put_time(std::localtime(&now), "%Y-%m-%d");
  return out.str();
}

/// The copy bandwidth decode is held against: device-to-device on a GPU,
/// memcpy on all threads on the CPU. Prints how it was measured.
double print_copy_bandwidth(const loaded_model& loaded, int threads) {
  if (loaded.device->name() == "cuda") {
    const double gbps = measure_cuda_copy_bandwidth_gbps();
    std::cout << "- copy bandwidth (device to device, read+write): " << std::fixed << std::setprecision(1) << gbps
              << " GB/s\n\n";
    return gbps;
  }
  const auto copy = cpu::measure_copy_bandwidth(threads);
  std::cout << "- copy bandwidth (memcpy, read+write): " << std::fixed << std::setprecision(1) << copy.all_threads_gbps
            << " GB/s on " << copy.threads << " threads, " << copy.one_thread_gbps << " GB/s on 1\n\n";
  return copy.all_threads_gbps;
}

void run(const bench_flags& flags) {
  loaded_model loaded = load_model(flags.model);
  const model_config& config = loaded.ckpt.config();
  std::mt19937 rng(0);
  std::cout << "## troupe bench: " << loaded.dir.filename().string() << " ("
            << architecture_model_type(config.architecture) << ", " << config.num_hidden_layers << " layers, hidden "
            << config.hidden_size << ", " << (config.torch_dtype ? dtype_name(*config.torch_dtype) : "f32") << ", "
            << std::fixed << std::setprecision(2) << loaded.ckpt.weight_bytes() / 1e9 << " GB of weights, "
            << streamed_weight_bytes(loaded) / 1e9 << " GB read per decode step, quantization "
            << describe_linear_formats(*loaded.model, loaded.quantization) << ")\n\n"
            << "- machine: " << cpu_model_name() << ", device " << loaded.device->name() << "\n- date: " << today()
            << "\n";
  const double copy_gbps = print_copy_bandwidth(loaded, flags.model.threads);
  const double prefill = measure_prefill(*loaded.model, flags.prompt_len, rng);
  std::cout << "| workload | tokens/s | step ms | effective bandwidth GB/s | % of copy bandwidth |\n"
            << "|---|---|---|---|---|\n"
            << "| prefill, prompt " << flags.prompt_len << " | " << std::setprecision(1) << prefill << " | "
            << std::setprecision(1) << 1e3 * flags.prompt_len / prefill << " | | |\n";
  for (int batch : parse_id_list(flags.batches, "--batches")) {
    if (batch <= 0) throw std::runtime_error("--batches: sizes must be positive");
    const decode_result r = measure_decode(loaded, flags, batch, rng);
    std::cout << "| decode, batch " << batch << " (prompt " << flags.decode_prompt_len << ") | " << std::setprecision(1)
              << r.tokens_per_s << " | " << std::setprecision(2) << r.step_ms << " | " << std::setprecision(1)
              << r.bandwidth_gbps << " | " << std::setprecision(0) << 100.0 * r.bandwidth_gbps / copy_gbps << "% |\n";
  }
  if (flags.verify_tokens.empty()) return;
  for (int tokens : parse_id_list(flags.verify_tokens, "--verify-tokens")) {
    if (tokens <= 0) throw std::runtime_error("--verify-tokens: counts must be positive");
    const double step_s = measure_verify_step(*loaded.model, flags, tokens, rng);
    std::cout << "| verify step, " << tokens << " tokens with logits (prompt " << flags.decode_prompt_len << ") | "
              << std::setprecision(1) << tokens / step_s << " | " << std::setprecision(2) << 1e3 * step_s << " | | |\n";
  }
}

void setup(CLI::App& root) {
  auto flags = std::make_shared<bench_flags>();
  CLI::App* cmd = root.add_subcommand("bench", "prefill and decode speed of a model, and decode's memory bandwidth");
  add_model_flags(*cmd, flags->model);
  cmd->add_option("--prompt-len", flags->prompt_len, "prefill prompt tokens")->check(CLI::PositiveNumber);
  cmd->add_option("--batches", flags->batches, "comma-separated decode batch sizes");
  cmd->add_option("--decode-prompt-len", flags->decode_prompt_len, "prompt tokens of each decode sequence")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--decode-tokens", flags->decode_tokens, "tokens generated per decode sequence")
      ->check(CLI::Range(3, 1 << 20));
  cmd->add_option("--verify-tokens", flags->verify_tokens,
                  "comma-separated tokens per speculative verify step of one sequence, each with its logits row "
                  "(e.g. 1,5: a decode step and a 4-draft verify; default: none)");
  cmd->callback([flags] { run(*flags); });
}

const bool registered = register_command("bench", setup);

}  // namespace
}  // namespace troupe::cli
