#include "tools/cli/cli_model.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <stdexcept>

#include "kernels/quantization.hpp"
#include "model/demo_model.hpp"
#include "model/model_files.hpp"

namespace troupe::cli {

void add_model_flags(CLI::App& command, model_flags& flags) {
  command.add_option("--model", flags.model_dir,
                     "Hugging Face model directory or GGUF file (default: the built-in demo model)");
  command.add_option("--device", flags.device, "cpu, cuda or auto")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  command.add_option("--threads", flags.threads, "CPU backend threads (0: all cores)")->check(CLI::NonNegativeNumber);
  command
      .add_option("--quantization", flags.quantization,
                  "weight-only quantisation at load: auto (a 3- to 6-bit GGUF / AWQ / GPTQ checkpoint as stored), "
                  "none, int8, int4, int4_asym, int5_asym, int4_nl, int6 or int4_g16 (the last two cpu; cuda holds "
                  "them as int8)")
      ->check(CLI::IsMember(quantization_choices()));
  command
      .add_option("--lm-head-quantization", flags.lm_head_quantization,
                  "the LM head's format: auto (int4 beside 4- to 6-bit layers when tied to the embeddings on the "
                  "cpu, its best logits rescored exactly; else int8 when the layers are quantised), none, int8, int4, "
                  "int4_asym, "
                  "int5_asym, int4_nl, int6 or int4_g16")
      ->check(CLI::IsMember(quantization_choices()));
}

std::string resolve_device(const std::string& requested) {
  if (requested != "auto") return requested;
  return cuda_available() ? "cuda" : "cpu";
}

loaded_model load_model(const model_flags& flags) {
  const std::filesystem::path dir =
      flags.model_dir.empty() ? ensure_demo_model() : std::filesystem::path(flags.model_dir);
  const std::string device = resolve_device(flags.device);
  quantized_checkpoint opened = open_for_quantization(dir, flags.quantization, true);  // kernels on both backends
  loaded_model loaded{dir, std::move(opened.weights), make_backend(device, flags.threads), nullptr, nullptr};
  loaded.model = std::make_unique<llama_model>(
      loaded.ckpt.config(), loaded.ckpt.weights(), *loaded.device, opened.quantization,
      lm_head_quantization(opened.quantization, flags.lm_head_quantization,
                           lm_head_rescored_by_default(loaded.ckpt.config(), *loaded.device))
          .value());
  loaded.quantization = opened.quantization;
  if (model_has_tokenizer(dir)) loaded.tokenizer = load_model_tokenizer(dir);
  return loaded;
}

std::vector<std::int32_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<std::int32_t> ids;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    std::int32_t id = 0;
    const char* first = text.data() + pos;
    const char* last = text.data() + comma;
    while (first < last && *first == ' ') ++first;
    const auto [end, error] = std::from_chars(first, last, id);
    if (first == last || error != std::errc() || end != last || id < 0)
      throw std::runtime_error(flag + ": '" + text.substr(pos, comma - pos) + "' is not a token id");
    ids.push_back(id);
    pos = comma + 1;
  }
  return ids;
}

}  // namespace troupe::cli
