#include "actors/drafter_loading.hpp"

#include <spdlog/spdlog.h>

#include "actors/core/speculation.hpp"
#include "model/batch_runner.hpp"
#include "model/demo_model.hpp"

namespace troupe {

namespace {

std::filesystem::path draft_directory(const engine_config& config) {
  if (!config.draft_model.empty()) return config.draft_model;
  if (config.model_dir.empty()) return ensure_demo_draft_model();  // the demo target's own draft
  throw std::runtime_error("knob 'draft_model': speculative=draft needs a draft model directory");
}

void check_proposer(const engine_config& config, speculative_method method) {
  if (method == speculative_method::off && config.num_speculative_tokens > 0)
    throw std::runtime_error("knob 'num_speculative_tokens' is " + std::to_string(config.num_speculative_tokens) +
                             " but knob 'speculative' is off: choose a proposer (ngram, draft, layerskip)");
  if (method != speculative_method::off && config.num_speculative_tokens == 0)
    throw std::runtime_error("knob 'speculative' is " + config.speculative +
                             " but knob 'num_speculative_tokens' is 0: set how many drafts to verify (e.g. 4)");
  if (config.prompt_lookup_min > config.prompt_lookup_max)
    throw std::runtime_error("knob 'prompt_lookup_min' (" + std::to_string(config.prompt_lookup_min) +
                             ") exceeds knob 'prompt_lookup_max' (" + std::to_string(config.prompt_lookup_max) + ")");
}

}  // namespace

std::shared_ptr<executor_resources> load_drafter(const engine_config& config, const executor_resources& target,
                                                 std::int64_t num_blocks) {
  const auto method = parse_speculative_method(config.speculative);
  if (!method) throw std::runtime_error("knob 'speculative': unknown proposer '" + config.speculative + "'");
  check_proposer(config, *method);
  if (*method == speculative_method::off || *method == speculative_method::ngram) return nullptr;

  auto drafter = std::make_shared<executor_resources>();
  backend_options options;
  options.threads = config.threads;
  options.batch_invariant = config.batch_invariant;
  drafter->device = make_backend(target.device->name(), options);
  std::string description;
  if (*method == speculative_method::draft) {
    const std::filesystem::path dir = draft_directory(config);
    drafter->weights_source = std::make_shared<const checkpoint>(checkpoint::open(dir));
    const model_config& draft = drafter->weights_source->config();
    if (draft.vocab_size != target.model->vocab_size())
      throw std::runtime_error((dir / "config.json").string() + ": field 'vocab_size' is " +
                               std::to_string(draft.vocab_size) + ", the target's is " +
                               std::to_string(target.model->vocab_size()) + " (a draft shares the target's tokenizer)");
    drafter->model = std::make_unique<llama_model>(draft, drafter->weights_source->weights(), *drafter->device);
    description = dir.filename().string() + " (" + std::to_string(draft.num_hidden_layers) + " layers)";
  } else {
    const std::vector<int> kept = kept_layers(config.speculative_skip_layers, target.model->num_layers());
    drafter->weights_device = target.device;
    drafter->model = std::make_unique<llama_model>(*target.model, *drafter->device, kept);
    description = "the target's layers skipped but " + std::to_string(kept.size());
  }
  const int block_size = target.cache->spec().block_size;
  const dtype kv_type = default_kv_type(drafter->model->config().torch_dtype, *drafter->device);
  drafter->cache = drafter->device->create_kv_cache(drafter->model->kv_spec(block_size, num_blocks, kv_type));
  spdlog::info("speculative decoding: {} drafts up to {} tokens with {}, on its own {} stream ({} MiB of KV)",
               config.speculative, config.num_speculative_tokens, description, drafter->device->name(),
               static_cast<std::int64_t>(drafter->model->kv_block_bytes(block_size, kv_type)) * num_blocks >> 20);
  return drafter;
}

}  // namespace troupe
