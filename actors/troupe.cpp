#include "actors/troupe.hpp"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <random>

#include "actors/core/request_constraint.hpp"
#include "actors/detokenizer_actor.hpp"
#include "actors/drafter_loading.hpp"
#include "actors/intake_actor.hpp"
#include "actors/kv_manager_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/speculator_actor.hpp"
#include "actors/tokenizer_actor.hpp"
#include "base/parallel_blocks.hpp"
#include "memory/kv_pool_sizing.hpp"
#include "model/batch_runner.hpp"
#include "model/chat/tool_calls.hpp"
#include "model/demo_model.hpp"
#include "model/gguf.hpp"
#include "model/model_files.hpp"

namespace troupe {

namespace {

// `requested` is one of the knob's choices (engine_config::problem checked it).
std::string resolve_device(const std::string& requested) {
  if (requested == "auto") return cuda_available() ? "cuda" : "cpu";
  return requested;
}

// Without an explicit size the pool holds every running sequence at full
// context, capped at a quarter of physical memory and 8 GiB.
std::int64_t automatic_pool_bytes(const engine_config& config, std::size_t block_bytes, int max_model_len,
                                  const memory_capacity& host) {
  const std::int64_t wanted_tokens = std::int64_t{config.max_num_seqs} * max_model_len;
  const std::int64_t cap = std::min<std::int64_t>(host.total / 4, std::int64_t{8} << 30);
  const std::int64_t wanted_blocks = wanted_tokens / config.block_size + config.max_num_seqs;
  const auto block = static_cast<std::int64_t>(block_bytes);
  return std::max<std::int64_t>(16, std::min(wanted_blocks, cap / block)) * block;
}

kv_pool_sizes size_pools(const engine_config& config, std::size_t block_bytes, int max_model_len,
                         const std::string& device) {
  const memory_capacity host = host_memory();
  kv_pool_request request;
  request.device_bytes = config.kv_cache_bytes;
  request.device_fraction = config.kv_cache_memory_fraction;
  request.host_bytes = config.swap_space_bytes;
  request.host_fraction = config.swap_space_memory_fraction;
  request.block_bytes = static_cast<std::int64_t>(block_bytes);
  request.auto_device_bytes = automatic_pool_bytes(config, block_bytes, max_model_len, host);
  request.device_is_host = device == "cpu";
  return size_kv_pools(request, host);
}

// Both pools are resident once created (the backends fault every page in),
// so a size the machine cannot back fails here rather than under load.
void allocate_pools(executor_resources& resources, const kv_cache_spec& spec, const kv_pool_sizes& pools) {
  try {
    resources.cache = resources.device->create_kv_cache(spec);
    if (pools.host_blocks > 0) resources.host = resources.device->create_host_pool(spec, pools.host_blocks);
  } catch (const std::exception& error) {
    throw std::runtime_error("KV pools of " + format_bytes(pools.device_bytes) + " (device) and " +
                             format_bytes(pools.host_bytes) + " (host) could not be allocated: " + error.what());
  }
}

// The step workspace grows with the budgets: its limit is fixed here, and
// the starting budgets must fit under it.
workspace_bound bound_workspace(const engine_config& config, llama_model& model, const std::string& device) {
  workspace_bound bound{model.workspace_bytes_per_token(), model.workspace_bytes_per_row(), 0};
  const std::size_t needed = bound.bytes(config.max_num_batched_tokens, config.max_num_seqs);
  if (config.max_step_workspace_bytes > 0) {
    bound.limit = static_cast<std::size_t>(config.max_step_workspace_bytes);
    if (std::string problem = bound.problem(config.max_num_batched_tokens, config.max_num_seqs); !problem.empty())
      throw std::runtime_error("knob 'max_step_workspace_bytes': " + problem);
  } else {
    // Twice the start's need leaves room for forks and verify groups (more
    // logits rows than sequences); on cuda the KV pool takes what the device
    // has, so no more is assumed there.
    const std::int64_t memory_share = device == "cpu" ? host_memory().total / 8 : 0;
    bound.limit = std::max(2 * needed, static_cast<std::size_t>(std::max<std::int64_t>(0, memory_share)));
  }
  model.set_workspace_limit(bound.limit);
  return bound;
}

std::vector<std::int32_t> eos_ids(const checkpoint& weights, const text::tokenizer& tokenizer) {
  std::vector<std::int32_t> ids;
  const auto& from_generation = weights.generation().eos_token_ids;
  for (auto id : from_generation.empty() ? weights.config().eos_token_ids : from_generation)
    ids.push_back(static_cast<std::int32_t>(id));
  if (ids.empty() && tokenizer.eos_token() && tokenizer.eos_token()->id) ids.push_back(*tokenizer.eos_token()->id);
  return ids;
}

// A tokenizer or special-token id without a row in the embedding table
// would throw in the forward pass or the sampler on the first request that
// met it; refuse the checkpoint at load instead, naming the file and field.
void check_vocabulary(const std::filesystem::path& dir, const checkpoint& weights, const text::tokenizer& tokenizer) {
  const std::int64_t vocab = weights.config().vocab_size;
  // A GGUF file holds what config.json and generation_config.json say.
  const bool single_file = is_gguf_path(dir);
  const auto file = [&](const char* name) { return single_file ? dir.string() : (dir / name).string(); };
  if (tokenizer.vocab_size() > vocab)
    throw std::runtime_error(file("config.json") + ": vocab_size " + std::to_string(vocab) +
                             " is smaller than the tokenizer's vocabulary of " +
                             std::to_string(tokenizer.vocab_size()) + " ids (added tokens included)");
  const auto check_id = [&](const char* name, const char* field, std::int64_t id) {
    if (id < 0 || id >= vocab)
      throw std::runtime_error(file(name) + ": " + field + " " + std::to_string(id) +
                               " is outside the model's vocabulary [0, " + std::to_string(vocab) + ")");
  };
  for (std::int64_t id : weights.config().eos_token_ids) check_id("config.json", "eos_token_id", id);
  if (const auto bos = weights.config().bos_token_id) check_id("config.json", "bos_token_id", *bos);
  for (std::int64_t id : weights.generation().eos_token_ids) check_id("generation_config.json", "eos_token_id", id);
  if (const auto bos = weights.generation().bos_token_id) check_id("generation_config.json", "bos_token_id", *bos);
}

/// The tool-call format for the `tool_call_parser` knob: "auto" reads the
/// template that renders requests with tools.
std::string tool_call_parser_name(const std::string& knob, const chat_template_source& templates) {
  std::string template_text;
  if (!templates.templates.empty()) {
    try {
      template_text = templates.select(true);
    } catch (const chat_template_error&) {
      // No template fits requests with tools: nothing to detect.
    }
  }
  const std::optional<tool_call_family> family = resolve_tool_call_family(knob, template_text);
  if (!family) throw std::runtime_error("knob 'tool_call_parser': unknown parser '" + knob + "'");
  return std::string(tool_call_family_name(*family));
}

/// generation_config.json's sampling fields as request defaults (read as
/// vLLM does: `do_sample` is not consulted, the values apply as given).
model_sampling_defaults sampling_defaults_of(const generation_config& generation) {
  model_sampling_defaults defaults;
  defaults.temperature = generation.temperature;
  defaults.top_p = generation.top_p;
  if (generation.top_k) defaults.top_k = static_cast<int>(std::min<std::int64_t>(*generation.top_k, 1 << 30));
  defaults.min_p = generation.min_p;
  defaults.repetition_penalty = generation.repetition_penalty;
  if (generation.max_new_tokens)
    defaults.max_tokens = static_cast<int>(std::min<std::int64_t>(*generation.max_new_tokens, 1 << 30));
  return defaults;
}

}  // namespace

double troupe_handles::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start).count();
}

loaded_engine_model load_engine_model(const engine_config& config) {
  if (std::string problem = config.problem(); !problem.empty()) throw std::runtime_error(problem);
  loaded_engine_model loaded;
  const std::filesystem::path dir =
      config.model_dir.empty() ? ensure_demo_model() : std::filesystem::path(config.model_dir);
  const std::string device = resolve_device(config.device);
  // Both backends run int8 / 4- and 5-bit layers and read stored codes.
  quantized_checkpoint opened = open_for_quantization(dir, config.quantization, true);
  const weight_quantization quantization = opened.quantization;
  loaded.weights = std::make_shared<const checkpoint>(std::move(opened.weights));
  loaded.preparer = std::make_shared<const prompt_preparer>(load_model_tokenizer(dir), load_model_chat_template(dir));
  check_vocabulary(dir, *loaded.weights, *loaded.preparer->tokenizer());
  const model_config& model = loaded.weights->config();
  loaded.max_model_len = static_cast<int>(model.max_context_length);
  if (config.max_model_len > 0) {
    if (config.max_model_len > model.max_context_length)
      throw std::runtime_error("knob 'max_model_len': " + std::to_string(config.max_model_len) +
                               " exceeds the model's context of " + std::to_string(model.max_context_length));
    loaded.max_model_len = config.max_model_len;
  }
  auto resources = std::make_shared<executor_resources>();
  resources->weights_source = loaded.weights;
  // draft_throw faults the drafter's executor (load_drafter), not this one.
  resources->fail_after_steps =
      config.test_executor_fault == "draft_throw" ? -1 : config.test_fail_executor_after_steps;
  resources->fault = config.test_executor_fault;
  backend_options device_options;
  device_options.threads = config.threads;
  device_options.batch_invariant = config.batch_invariant;
  resources->device = make_backend(device, device_options);
  resources->model =
      std::make_unique<llama_model>(model, loaded.weights->weights(), *resources->device, quantization,
                                    lm_head_quantization(quantization, config.lm_head_quantization,
                                                         lm_head_rescored_by_default(model, *resources->device))
                                        .value());
  const dtype kv_type = default_kv_type(model.torch_dtype, *resources->device);
  const std::size_t block_bytes = resources->model->kv_block_bytes(config.block_size, kv_type);
  const kv_pool_sizes pools = size_pools(config, block_bytes, loaded.max_model_len, device);
  loaded.num_device_blocks = pools.device_blocks;
  loaded.num_host_blocks = pools.host_blocks;
  const kv_cache_spec spec = resources->model->kv_spec(config.block_size, loaded.num_device_blocks, kv_type);
  allocate_pools(*resources, spec, pools);
  loaded.workspace = bound_workspace(config, *resources->model, device);
  loaded.one_token_step_s = time_one_token_step(*resources);
  loaded.executor = resources;
  loaded.drafter = load_drafter(config, *resources, loaded.num_device_blocks, *loaded.preparer->tokenizer());
  if (loaded.drafter) loaded.draft_one_token_step_s = time_one_token_step(*loaded.drafter, true);
  resources->finish_before_answering = loaded.drafter && loaded.drafter->shares_target_kv;
  loaded.eos_token_ids = eos_ids(*loaded.weights, *loaded.preparer->tokenizer());
  loaded.constraints = make_constraint_compiler(*loaded.preparer->tokenizer(), loaded.eos_token_ids);
  loaded.info.served_model_name = config.served_model_name.empty() ? dir.filename().string() : config.served_model_name;
  loaded.info.model_dir = dir.string();
  loaded.info.vocab_size = static_cast<int>(model.vocab_size);
  loaded.info.max_model_len = loaded.max_model_len;
  loaded.info.device = device;
  loaded.info.tool_call_parser = tool_call_parser_name(config.tool_call_parser, loaded.preparer->templates());
  loaded.info.sampling_defaults = sampling_defaults_of(loaded.weights->generation());
  loaded.info.kv_pool_device_bytes = pools.device_bytes;
  loaded.info.kv_pool_host_bytes = pools.host_bytes;
  spdlog::info("model {}: {} layers, context {}, on {}, linear layers {}", loaded.info.served_model_name,
               model.num_hidden_layers, loaded.max_model_len, device,
               describe_linear_formats(*resources->model, quantization));
  spdlog::info("KV pools allocated and resident: device {} blocks of {} tokens ({}), host swap {} blocks ({})",
               loaded.num_device_blocks, config.block_size, format_bytes(pools.device_bytes), loaded.num_host_blocks,
               format_bytes(pools.host_bytes));
  spdlog::info("model {}: a one-token step takes {:.3f} ms", loaded.info.served_model_name,
               1e3 * loaded.one_token_step_s);
  return loaded;
}

troupe_handles spawn_troupe(caf::actor_system& system, const engine_config& config, loaded_engine_model& model) {
  troupe_handles handles;
  handles.clock_start = std::chrono::steady_clock::now();
  scheduler_setup setup;
  setup.loop.scheduler = scheduler_config(config);
  setup.loop.scheduler.max_model_len = model.max_model_len;
  setup.loop.scheduler.num_device_blocks = static_cast<std::int32_t>(model.num_device_blocks);
  setup.loop.scheduler.num_host_blocks = static_cast<std::int32_t>(model.num_host_blocks);
  setup.loop.scheduler.eos_token_ids = model.eos_token_ids;
  setup.loop.scheduler.seed = std::random_device{}();
  // Refused here, before any actor runs, rather than inside the scheduler actor.
  if (std::string problem = scheduler::validate_config(setup.loop.scheduler); !problem.empty())
    throw std::runtime_error(problem);
  if (!make_policy(config.policy)) throw std::runtime_error("knob 'policy': unknown policy '" + config.policy + "'");
  setup.loop.policy = config.policy;

  handles.kv = spawn_kv_manager(system, kv_manager_config(setup.loop.scheduler));
  handles.executor = spawn_executor(system, model.executor);
  // The fault hook poisons either prompt preparation or output streaming.
  const std::string& fault = config.test_tokenizer_fault;
  const bool output_fault = fault == "output" || fault == "output_exit";
  const std::string& marker = config.test_tokenizer_fault_marker;
  const tokenizer_setup worker{model.preparer, model.constraints, output_fault ? "" : marker, fault == "exit"};
  const detokenizer_setup shard{model.preparer->tokenizer(), output_fault ? marker : "", fault == "output_exit"};
  for (int i = 0; i < std::max(1, config.tokenizer_workers); ++i) {
    handles.tokenizers.push_back(spawn_tokenizer(system, worker));
    handles.detokenizers.push_back(spawn_detokenizer(system, shard));
  }
  handles.gauges = std::make_shared<queue_gauges>();
  setup.step_timeout = std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(config.step_timeout_s));
  // /health says "stuck" before the timeout fails the engine.
  setup.loop.stuck_after_s = std::min(30.0, config.step_timeout_s / 2);
  setup.kv = handles.kv;
  setup.executor = handles.executor;
  setup.shards = handles.detokenizers;
  setup.gauges = handles.gauges;
  setup.loop.one_token_step_s = model.one_token_step_s;
  setup.loop.draft_one_token_step_s = model.draft_one_token_step_s;
  setup.loop.workspace = model.workspace;
  setup.speculation = *parse_speculative_method(config.speculative);  // checked by load_drafter
  if (model.drafter) {
    handles.draft_executor = spawn_draft_executor(system, model.drafter, config.block_size);
    // A round in the target's KV may not be given up (it might still write), so it gets a step's time.
    speculator_setup speculator{.draft_executor = handles.draft_executor};
    if (model.drafter->shares_target_kv) speculator.round_timeout = setup.step_timeout;
    handles.speculator = spawn_speculator(system, speculator);
    setup.speculator = handles.speculator;
    setup.drafter_own_compute = drafter_has_own_compute(model.drafter->device->name() == "cpu", config.threads,
                                                        config.draft_threads, available_cores());
    setup.block_size = config.block_size;
    const bool shared = model.drafter->shares_target_kv;
    setup.loop.scheduler.drafter_shares_target_kv = shared;
    const bool ahead = drafts_ahead(setup.loop.scheduler.speculative_draft_ahead, setup.drafter_own_compute, shared);
    spdlog::info(
        "speculative decoding: the next round is drafted during verification: {} (knob "
        "speculative_draft_ahead {}; the drafter {} compute of its own{})",
        ahead ? "yes" : "no", config.speculative_draft_ahead, setup.drafter_own_compute ? "has" : "has no",
        shared ? " and works in the target's KV" : "");
  }
  handles.scheduler = spawn_scheduler(system, std::move(setup), handles.clock_start);

  intake_setup intake;
  intake.limits = admission_limits(config);
  intake.limits.max_model_len = model.max_model_len;
  intake.limits.vocab_size = model.info.vocab_size;
  intake.prepare = prepare_limits(config);
  intake.gauges = handles.gauges;
  intake.tokenizers = handles.tokenizers;
  intake.worker = worker;
  intake.shards = handles.detokenizers;
  intake.shard = shard;
  intake.scheduler = handles.scheduler;
  intake.default_timeout_s = config.request_timeout_s;
  intake.clock_start = handles.clock_start;
  handles.intake = spawn_intake(system, std::move(intake));
  return handles;
}

void add_troupe_message_types(caf::actor_system_config& config) { config.add_message_types<caf::id_block::troupe>(); }

}  // namespace troupe
