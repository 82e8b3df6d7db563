#include "actors/drafter_loading.hpp"

#include <spdlog/spdlog.h>

#include "actors/core/speculation.hpp"
#include "model/batch_runner.hpp"
#include "model/checkpoint.hpp"
#include "model/demo_model.hpp"
#include "model/gguf.hpp"
#include "model/model_files.hpp"

namespace troupe {

namespace {

std::filesystem::path draft_directory(const engine_config& config) {
  if (!config.draft_model.empty()) return config.draft_model;
  if (config.model_dir.empty()) return ensure_demo_draft_model();  // the demo target's own draft
  throw std::runtime_error("knob 'draft_model': speculative=draft needs a draft model directory");
}

// A draft head of fewer rows than the vocabulary: named in the load log.
std::string head_description(const engine_config& config, const model_config& draft) {
  if (config.draft_vocab_size == 0 || config.draft_vocab_size == draft.vocab_size) return "";
  return ", LM head over ids 0-" + std::to_string(config.draft_vocab_size - 1) + " of " +
         std::to_string(draft.vocab_size);
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
  if (config.draft_vocab_size > 0 && method != speculative_method::draft)
    throw std::runtime_error("knob 'draft_vocab_size' is " + std::to_string(config.draft_vocab_size) +
                             " but knob 'speculative' is " + config.speculative +
                             ": it narrows the draft model's LM head (speculative=draft)");
  const bool drafter = method == speculative_method::draft || method == speculative_method::layerskip;
  if (config.draft_threads > 0 && !drafter)
    throw std::runtime_error("knob 'draft_threads' is " + std::to_string(config.draft_threads) +
                             " but knob 'speculative' is " + config.speculative +
                             ": only a drafter (draft, layerskip) runs on threads of its own");
  if (config.speculative_draft_ahead == "on" && !drafter)
    throw std::runtime_error("knob 'speculative_draft_ahead' is on but knob 'speculative' is " + config.speculative +
                             ": only a drafter (draft, layerskip) runs rounds to draft ahead");
}

// Text that exercises the normaliser, pre-tokeniser and merges: two
// tokenizers with one vocabulary but other rules encode it differently.
constexpr std::string_view tokenizer_probe =
    "Hello, World! It's 2024-06-01: naïve café über straße, 12345 tokens\n\tindented  double  spaces "
    "CamelCaseWords snake_case_words <tag attr=\"x\">é</tag> 東京 🙂";

std::string quoted(const std::optional<std::string>& text) { return text ? "'" + *text + "'" : "none"; }

// A draft proposes target ids: the same id must be the same token on both
// sides, or every draft is wrong (or worse, a special token). Compares the
// vocabulary id by id, the special tokens, and how a probe text encodes.
void check_draft_tokenizer(const std::filesystem::path& dir, const text::tokenizer& draft,
                           const text::tokenizer& target) {
  // A GGUF file holds what tokenizer.json and tokenizer_config.json say.
  const auto file = [&](const char* name) { return is_gguf_path(dir) ? dir.string() : (dir / name).string(); };
  const std::string json = file("tokenizer.json");
  const std::string tail = " (a draft shares the target's tokenizer)";
  if (draft.vocab_size() != target.vocab_size())
    throw std::runtime_error(json + ": the tokenizer has " + std::to_string(draft.vocab_size()) +
                             " ids, the target's " + std::to_string(target.vocab_size()) + tail);
  for (text::token_id id = 0; id < draft.vocab_size(); ++id) {
    const std::optional<std::string> mine = draft.id_to_token(id);
    const std::optional<std::string> theirs = target.id_to_token(id);
    if (mine != theirs || draft.is_special(id) != target.is_special(id))
      throw std::runtime_error(json + ": token id " + std::to_string(id) + " is " + quoted(mine) +
                               (draft.is_special(id) ? " (special)" : "") + ", the target's " + quoted(theirs) +
                               (target.is_special(id) ? " (special)" : "") + tail);
  }
  // Compared where both name one: a missing tokenizer_config.json changes no id.
  const auto check_special = [&](const char* field, const std::optional<text::special_token>& mine,
                                 const std::optional<text::special_token>& theirs) {
    if (mine && theirs && mine->text != theirs->text)
      throw std::runtime_error(file("tokenizer_config.json") + ": field '" + field + "' is '" + mine->text +
                               "', the target's '" + theirs->text + "'" + tail);
  };
  check_special("bos_token", draft.bos_token(), target.bos_token());
  check_special("eos_token", draft.eos_token(), target.eos_token());
  if (draft.encode(tokenizer_probe, true) != target.encode(tokenizer_probe, true))
    throw std::runtime_error(json +
                             ": encodes text differently from the target's tokenizer (its normalizer, "
                             "pre_tokenizer, merges or post_processor differ)" +
                             tail);
}

// A draft directory may come without tokenizer files (the demo draft does):
// then only its vocab_size could be compared.
void check_draft_vocabulary(const std::filesystem::path& dir, const model_config& draft,
                            const executor_resources& target, const text::tokenizer& target_tokenizer) {
  if (draft.vocab_size != target.model->vocab_size())
    throw std::runtime_error((dir / "config.json").string() + ": field 'vocab_size' is " +
                             std::to_string(draft.vocab_size) + ", the target's is " +
                             std::to_string(target.model->vocab_size()) + " (a draft shares the target's tokenizer)");
  if (is_gguf_path(dir) || std::filesystem::exists(dir / "tokenizer.json")) {
    check_draft_tokenizer(dir, *load_model_tokenizer(dir), target_tokenizer);
  } else {
    spdlog::info("speculative decoding: {} has no tokenizer.json; its vocab_size matches the target's", dir.string());
  }
}

}  // namespace

std::shared_ptr<executor_resources> load_drafter(const engine_config& config, const executor_resources& target,
                                                 std::int64_t num_blocks, const text::tokenizer& target_tokenizer) {
  const auto method = parse_speculative_method(config.speculative);
  if (!method) throw std::runtime_error("knob 'speculative': unknown proposer '" + config.speculative + "'");
  check_proposer(config, *method);
  if (*method == speculative_method::off || *method == speculative_method::ngram) return nullptr;

  auto drafter = std::make_shared<executor_resources>();
  if (config.test_executor_fault == "draft_throw") {
    drafter->fault = "throw";
    drafter->fail_after_steps = config.test_fail_executor_after_steps;
  }
  backend_options options;
  options.threads = config.draft_threads > 0 ? config.draft_threads : config.threads;
  options.batch_invariant = config.batch_invariant;
  drafter->device = make_backend(target.device->name(), options);
  std::string description;
  if (*method == speculative_method::draft) {
    const std::filesystem::path dir = draft_directory(config);
    // The draft's bytes per token decide what a round costs: by default it
    // is quantised as the target is (drafts are verified, so its format
    // moves acceptance, never the output).
    const std::string& format = config.draft_quantization == "auto" ? config.quantization : config.draft_quantization;
    quantized_checkpoint opened = open_for_quantization(dir, format, true);
    drafter->weights_source = std::make_shared<const checkpoint>(std::move(opened.weights));
    const model_config& draft = drafter->weights_source->config();
    check_draft_vocabulary(dir, draft, target, target_tokenizer);
    if (config.draft_vocab_size > draft.vocab_size)
      throw std::runtime_error("knob 'draft_vocab_size' is " + std::to_string(config.draft_vocab_size) +
                               ", more than the " + std::to_string(draft.vocab_size) + " ids of " +
                               (dir / "config.json").string());
    drafter->model = std::make_unique<llama_model>(draft, drafter->weights_source->weights(), *drafter->device,
                                                   opened.quantization, std::nullopt, config.draft_vocab_size);
    description = dir.filename().string() + " (" + std::to_string(draft.num_hidden_layers) + " layers, linear layers " +
                  describe_linear_formats(*drafter->model, opened.quantization) + head_description(config, draft) + ")";
  } else {
    const std::vector<int> kept = kept_layers(config.speculative_skip_layers, target.model->num_layers());
    drafter->weights_device = target.device;
    drafter->model = std::make_unique<llama_model>(*target.model, *drafter->device, kept);
    description = "the target's layers skipped but " + std::to_string(kept.size());
    drafter->shares_target_kv = shares_target_kv(kept, config.speculative_draft_ahead);
  }
  const int block_size = target.cache->spec().block_size;
  std::string kv;
  if (drafter->shares_target_kv) {
    drafter->cache = target.cache;
    kv = "the target's own KV for its layers";
  } else {
    const dtype kv_type = default_kv_type(drafter->model->config().torch_dtype, *drafter->device);
    drafter->cache = drafter->device->create_kv_cache(drafter->model->kv_spec(block_size, num_blocks, kv_type));
    kv = std::to_string(static_cast<std::int64_t>(drafter->model->kv_block_bytes(block_size, kv_type)) * num_blocks >>
                        20) +
         " MiB of KV";
  }
  spdlog::info("speculative decoding: {} drafts up to {} tokens with {}, on its own {} stream ({})", config.speculative,
               config.num_speculative_tokens, description, drafter->device->name(), kv);
  return drafter;
}

}  // namespace troupe
