#pragma once
// What the offline commands (generate, score, bench) share: the model,
// device and thread flags, loading a model directory (or the built-in demo
// model) onto a backend, and parsing id lists.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "model/checkpoint.hpp"
#include "model/llama_model.hpp"
#include "model/text/tokenizer.hpp"

namespace CLI {
class App;
}

namespace troupe::cli {

/// Flags naming the model and where it runs.
struct model_flags {
  std::string model_dir;  ///< empty: the built-in demo model
  std::string device = "auto";
  int threads = 0;
  std::string quantization = "auto";          ///< "auto" or a weight_quantization name (open_for_quantization)
  std::string lm_head_quantization = "auto";  ///< "auto" or a weight_quantization name
};

/// Adds --model, --device, --threads, --quantization and --lm-head-quantization to `command`.
void add_model_flags(CLI::App& command, model_flags& flags);

/// A model loaded for an offline command.
struct loaded_model {
  std::filesystem::path dir;
  checkpoint ckpt;
  std::unique_ptr<backend> device;
  std::unique_ptr<llama_model> model;
  std::shared_ptr<const text::tokenizer> tokenizer;              ///< null when the directory has no tokenizer.json
  weight_quantization quantization = weight_quantization::none;  ///< what the linear layers run in
};

/// Resolves "auto" to "cuda" when a GPU is usable, else "cpu".
std::string resolve_device(const std::string& requested);

/// Opens the model directory (or creates/reuses the demo model) and uploads it.
loaded_model load_model(const model_flags& flags);

/// Parses "1,2,3" into ids; throws std::runtime_error naming `flag` on bad input.
std::vector<std::int32_t> parse_id_list(const std::string& text, const std::string& flag);

}  // namespace troupe::cli
