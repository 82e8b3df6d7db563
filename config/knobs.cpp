// The declaration of every knob: the only place a knob's default and range
// are written. The configuration structs of the other layers take their
// defaults from here (knob_defaults()) and are built from these values by
// one function each (see config/README.md).

#include "config/config_store.hpp"

namespace troupe {

namespace {

knob_spec integer(std::string name, std::int64_t fallback, double min, double max, std::string unit, std::string help,
                  bool live = false) {
  return {std::move(name),
          knob_kind::integer,
          std::to_string(fallback),
          min,
          max,
          {},
          std::move(unit),
          std::move(help),
          live,
          {}};
}

knob_spec real(std::string name, std::string fallback, double min, double max, std::string unit, std::string help,
               bool live = false) {
  return {
      std::move(name), knob_kind::real, std::move(fallback), min, max, {}, std::move(unit), std::move(help), live, {}};
}

knob_spec text(std::string name, std::string fallback, std::vector<std::string> choices, std::string help,
               bool live = false) {
  return {std::move(name),
          knob_kind::text,
          std::move(fallback),
          std::nullopt,
          std::nullopt,
          std::move(choices),
          {},
          std::move(help),
          live,
          {}};
}

knob_spec boolean(std::string name, bool fallback, std::string help, bool live = false) {
  return {std::move(name),
          knob_kind::boolean,
          fallback ? "true" : "false",
          std::nullopt,
          std::nullopt,
          {},
          {},
          std::move(help),
          live,
          {}};
}

knob_spec secret(knob_spec knob) {
  knob.secret = true;
  return knob;
}

std::vector<knob_spec> in_group(std::vector<knob_spec> knobs, const std::string& group) {
  for (auto& knob : knobs) knob.group = group;
  return knobs;
}

}  // namespace

std::vector<knob_spec> engine_knobs() {
  constexpr double giga = 1024.0 * 1024 * 1024;
  return in_group(
      {
          text("model", "", {}, "Hugging Face model directory or GGUF file (empty: the built-in demo model)"),
          text("served_model_name", "", {}, "model name clients use (default: the directory name)"),
          text("device", "auto", {"auto", "cpu", "cuda"}, "backend to run on"),
          integer("threads", 0, 0, 1024, "threads", "CPU backend threads (0: all cores)"),
          integer("max_num_batched_tokens", 2048, 1, 1 << 20, "tokens", "token budget of one step", true),
          integer("max_num_seqs", 256, 1, 65536, "sequences", "running sequences at most", true),
          integer("max_prefill_chunk", 512, 1, 1 << 20, "tokens", "tokens of one prompt per step at most", true),
          integer("max_step_workspace_bytes", 0, 0, 4096 * giga, "bytes",
                  "the step workspace (one step's activations and logits) at most; a live max_num_batched_tokens "
                  "or max_num_seqs whose steps would need more is refused (0: twice what the starting budgets need, "
                  "on cpu at least an eighth of physical memory)"),
          integer("block_size", 16, 1, 256, "tokens", "KV cache tokens per block"),
          integer("kv_cache_bytes", 0, 0, 4096 * giga, "bytes", "device KV pool size (0: sized automatically)"),
          real("kv_cache_memory_fraction", "0", 0, 0.95, "fraction",
               "device KV pool as a fraction of the device's memory (physical memory, or the cgroup limit, on cpu); "
               "0: use kv_cache_bytes; wins over it when set"),
          integer("swap_space_bytes", 1 << 30, 0, 4096 * giga, "bytes", "host memory for swapped-out KV blocks"),
          real("swap_space_memory_fraction", "0", 0, 0.95, "fraction",
               "host swap pool as a fraction of physical memory (or the cgroup limit); 0: use swap_space_bytes; "
               "wins over it when set"),
          integer("max_model_len", 0, 0, 1 << 24, "tokens", "context length limit (0: the model's)"),
          text("policy", "fcfs", {"fcfs", "priority", "mlfq", "deadline", "fair"}, "scheduling policy", true),
          integer("mlfq_quantum", 16, 1, 65536, "steps",
                  "mlfq policy: decode steps a request runs at the top level before it drops a level (each level "
                  "down doubles it)",
                  true),
          integer("mlfq_levels", 4, 1, 16, "levels", "mlfq policy: number of queues", true),
          integer("mlfq_quantum_growth", 2, 1, 16, "",
                  "mlfq policy: each level's quantum and prompt-length limit is this times the one above", true),
          integer("mlfq_entry_prompt_tokens", 256, 1, 1 << 20, "tokens",
                  "mlfq policy: longest prompt that joins the top level (each level down admits growth times more)",
                  true),
          real("mlfq_promote_after", "30", 0.001, 86400, "s",
               "mlfq policy: a request unserved this long goes back to the top level (starvation guard)", true),
          real("fair_prompt_weight", "1", 0, 1000, "",
               "fair policy: service charged to a tenant per computed prompt token", true),
          real("fair_output_weight", "2", 0, 1000, "", "fair policy: service charged to a tenant per generated token",
               true),
          integer("fair_idle_tenants", 1024, 0, 1 << 24, "tenants",
                  "fair policy: tenants without live requests whose counters are remembered", true),
          text("preemption_mode", "auto", {"auto", "swap", "recompute"}, "how preempted requests give up KV", true),
          integer("swap_min_tokens", 256, 0, 1 << 24, "tokens",
                  "preemption_mode auto: sequences shorter than this are recomputed rather than swapped", true),
          integer("preemption_grace_steps", 8, 0, 1 << 20, "steps",
                  "steps a sequence runs after admission or resumption before a more urgent request may preempt it",
                  true),
          real("admission_watermark", "0.01", 0, 0.5, "fraction",
               "share of device KV blocks kept free when admitting new work", true),
          boolean("enable_prefix_caching", true, "reuse KV blocks of identical prompt prefixes"),
          integer("max_waiting_requests", 4096, 1, 1 << 24, "requests",
                  "queue bound (requests not yet started, prompts awaiting preparation included); more is rejected",
                  true),
          integer("max_pending_prompts", 1024, max_prompts_per_request, 1 << 24, "prompts",
                  "prompts (and /tokenize, /detokenize calls) queued for or in preparation at most (at least " +
                      std::to_string(max_prompts_per_request) +
                      ", the prompts of one completions request); more get 429 prompt_queue_full"),
          integer("max_pending_prompts_per_connection", 256, max_prompts_per_request, 1 << 24, "prompts",
                  "as max_pending_prompts, for one HTTP connection or WebSocket (at least " +
                      std::to_string(max_prompts_per_request) +
                      ", the prompts of one completions request); more get 429 connection_prompt_limit"),
          integer("max_n", 16, 1, 1024, "choices", "limit on the request field n", true),
          integer("max_stop_strings", 16, 0, 1024, "strings", "limit on entries of `stop`", true),
          integer("max_stop_string_bytes", 256, 1, 65536, "bytes", "limit on each stop string", true),
          integer("max_logit_bias", 1024, 0, 1 << 20, "entries", "limit on entries of `logit_bias`", true),
          integer("max_top_logprobs", 20, 0, 1024, "alternatives", "limit on `top_logprobs`", true),
          integer("max_request_output_tokens", 262144, 1, 1LL << 40, "tokens",
                  "limit on the tokens one request may generate: max_tokens (unset: the context length) times n "
                  "times its prompts; one choice up to the context is always allowed",
                  true),
          integer("min_request_priority", -2147483648LL, -2147483648.0, 2147483647.0, "",
                  "most urgent `priority` a client may ask for (lower runs first); lower values are refused", true),
          real("min_request_deadline_ms", "0", 0, 86'400'000.0, "ms",
               "shortest `deadline_ms` a client may ask for; shorter deadlines are refused", true),
          integer("tokenizer_workers", 2, 1, 256, "actors",
                  "prompt-preparation workers (a thread each: render, encode, constraint compile, /tokenize) and "
                  "output shards (detokenize, stop strings), each"),
          real("request_timeout", "600", 0.001, 86400.0 * 7, "s", "default per-request timeout"),
          real("step_timeout", "300", 0.01, 86400, "s",
               "a step the executor has not answered after this long fails the engine (its requests end with an "
               "error); /health reports the step stuck after half of it, at most 30 s"),
          boolean("batch_invariant", false,
                  "bitwise batch-independent numerics: a seeded request gives the same tokens whatever shares "
                  "its steps (cpu; slower prefill)"),
          text("tool_call_parser", "auto", {"auto", "none", "llama3_json", "hermes", "mistral", "deepseek_v3"},
               "how tool calls are read out of chat output: auto detects the format from the chat template "
               "(restart to change)"),
          text(
              "quantization", "auto",
              {"auto", "none", "int8", "int4", "int4_asym", "int5_asym", "int4_nl", "int6", "int4_g16"},
              "weight-only quantisation of the linear layers at load (cpu and cuda; round to nearest): int8 per output "
              "row, int4 per group of 32 inputs, int4_nl 4-bit codes on IQ4_NL's 16 levels per group of 32, "
              "int5_asym 5-bit codes per group of 32, int6 6-bit codes and int4_g16 4-bit codes with a scale per 16 "
              "(cpu; cuda holds them as int8); embeddings keep their type. auto: a checkpoint stored in 3 to 6 bits "
              "(GGUF Q3_K/Q4_0/Q4_1/Q4_K/Q5_0/Q5_1/Q5_K/IQ4_NL/IQ4_XS/Q6_K, AWQ, GPTQ) runs as stored and other "
              "GGUF block formats (Q8_0, Q2_K) as int8, others as none"),
          text("lm_head_quantization", "auto",
               {"auto", "none", "int8", "int4", "int4_asym", "int5_asym", "int4_nl", "int6", "int4_g16"},
               "the LM head's format at load: auto keeps an unquantised model's head; beside 4- to 6-bit layers it is "
               "int4 when the head is tied to the embeddings on the cpu (its 64 best logits a row rescored "
               "exactly from them), else int8; an untied int4 head reads fewer bytes per token at some cost "
               "in agreement with bf16"),
          text("speculative", "off", {"off", "ngram", "draft", "layerskip"},
               "speculative decoding proposer: prompt lookup, a draft model, or the target with layers skipped "
               "(restart to change; num_speculative_tokens turns it down live)"),
          text("draft_model", "", {},
               "speculative draft: Hugging Face directory of a smaller model with the target's tokenizer (empty: "
               "the built-in demo draft, when serving the built-in demo model)"),
          text("draft_quantization", "auto",
               {"auto", "none", "int8", "int4", "int4_asym", "int5_asym", "int4_nl", "int6", "int4_g16"},
               "speculative draft: weight-only quantisation of the draft model at load, as knob quantization does "
               "for the target (auto: the same setting as the target's, so a quantised target drafts with a "
               "quantised draft); its LM head follows lm_head_quantization's auto rule"),
          integer("draft_vocab_size", 0, 0, 1 << 24, "ids",
                  "speculative draft: the draft's LM head scores only the ids below this (0: every id); "
                  "byte-level BPE vocabularies number tokens by merge order, so the lowest ids are the most "
                  "frequent. Drafts never propose a higher id (verification still emits them), and a round "
                  "reads that much less of the head"),
          integer("draft_threads", 0, 0, 1024, "threads",
                  "speculative draft, layerskip: CPU threads of the drafter's executor (0: as many as knob threads); "
                  "threads + draft_threads within the cores lets drafting run beside verification"),
          text("speculative_draft_ahead", "auto", {"auto", "on", "off"},
               "speculative draft, layerskip: draft the next round while the target verifies, guessing every "
               "draft and the bonus token right (the drafts are used only when the guess held); auto: on where "
               "the drafter does not share the target's compute (cuda, or cpu threads + draft_threads within "
               "the cores)",
               true),
          text("speculative_skip_layers", "", {},
               "layerskip: decoder layers the drafter skips, e.g. \"4-7\" or \"1,3,5\" (empty: the upper half)"),
          integer("prompt_lookup_max", 4, 1, 64, "tokens", "ngram: longest suffix matched against the context"),
          integer("prompt_lookup_min", 1, 1, 64, "tokens", "ngram: shortest suffix matched against the context"),
          integer("num_speculative_tokens", 0, 0, 16, "tokens",
                  "speculative decoding: draft tokens verified per decoding sequence and step at most (0: off)", true),
          boolean("speculative_turn_down", true,
                  "speculative decoding: a decode speculates only where the measured costs say it pays; false: every "
                  "eligible decode speculates up to speculative_max_batch (to measure the proposer alone)",
                  true),
          boolean("speculative_adaptive", true,
                  "speculative decoding: each sequence's draft length follows its acceptance rate", true),
          integer("speculative_max_batch", 16, 0, 65536, "sequences",
                  "speculative decoding: skipped while more sequences than this are unfinished (running, waiting or "
                  "swapped)",
                  true),
          integer("speculative_tree_width", 1, 1, 8, "branches",
                  "speculative decoding: draft tree branches verified at once with a tree attention mask (ngram: "
                  "other matches, draft: runners-up of the first draft; 1: chains)",
                  true),
          integer("test_fail_executor_after_steps", -1, -1, 1 << 30, "steps",
                  "testing only: the executor fails after this many steps (-1: never)"),
          text("test_executor_fault", "error", {"error", "throw", "malformed", "hang", "draft_throw"},
               "testing only: how the executor fails (test_fail_executor_after_steps): every later step answers an "
               "error (the engine fails), the next step throws std::bad_alloc once (its requests fail, the "
               "engine goes on), returns a result with the wrong number of samples, or never answers; draft_throw: "
               "the drafter's executor throws std::bad_alloc once at that step (its round has no drafts)"),
          text("test_tokenizer_fault_marker", "", {},
               "testing only: a prompt containing this text makes the tokenizer worker that prepares it, or the "
               "output shard that streams it, fail (empty: never)"),
          text("test_tokenizer_fault", "throw", {"throw", "exit", "output", "output_exit"},
               "testing only: how (test_tokenizer_fault_marker): the worker throws inside the encoding (that "
               "request fails) or dies (it is restarted); output, output_exit: the output shard throws streaming "
               "the request's first token (that request fails) or dies (it is restarted, its streams fail)"),
      },
      "engine");
}

std::vector<knob_spec> server_knobs() {
  return in_group(
      {
          text("host", "127.0.0.1", {}, "address to listen on"),
          integer("port", 8000, 0, 65535, "", "TCP port (0: pick a free one)"),
          secret(text("api_key", "", {}, "require `Authorization: Bearer <key>` when set")),
          text("prefix_cache_isolation", "none", {"none", "api_key", "user"},
               "which requests share cached prompt prefixes (reported as cached_tokens): all, those of one API "
               "key, or those of one `user`; left at its default while api_key is set, isolated by API key"),
          integer("io_threads", 2, 1, 256, "threads", "HTTP socket threads"),
          integer("worker_threads", 2, 1, 256, "threads", "HTTP route handler threads"),
          integer("max_body_bytes", 8 << 20, 1024, 1 << 30, "bytes", "larger request bodies get 413"),
          integer("max_header_bytes", 64 << 10, 1024, 1 << 20, "bytes", "larger request headers get 431"),
          real("idle_timeout", "60", 0.1, 86400, "s", "close keep-alive connections idle this long"),
          real("read_timeout", "30", 0.1, 86400, "s", "time to receive a whole request (slowloris bound)"),
          real("write_timeout", "30", 0.1, 86400, "s", "time a write to a client may stall"),
          integer("max_connections", 1024, 1, 1 << 20, "connections", "open connections at most (more get 503)"),
          integer("stream_queue_bytes", 4 << 20, 4096, 1 << 30, "bytes", "outgoing queue per SSE stream or WebSocket"),
          integer("max_ws_requests", 256, 1, 65536, "requests", "concurrent requests per WebSocket"),
          real("shutdown_timeout", "30", 0, 86400, "s", "on SIGTERM, drain in-flight requests this long"),
          text("config", "", {},
               "JSON file of knob values (lower precedence than env and flags); POST /admin/config/save writes the "
               "live settings back to it (alias --config-file)"),
          boolean("admin", true, "serve the operator console and the /admin API"),
          integer("admin_port", -1, -1, 65535, "",
                  "serve the /admin endpoints on this second port only, and not on port (-1: on port; 0: pick a "
                  "free one)"),
          secret(text("admin_token", "", {},
                      "bearer token the /admin endpoints require (API keys never open them); without one they answer "
                      "on loopback only, and a non-loopback host refuses to start")),
          text("allowed_origins", "", {},
               "browser origins besides the server's own (comma-separated, e.g. https://console.example.com; *: "
               "any) whose pages may call /admin or open /v1/ws; other cross-origin pages get 403"),
          real("default_temperature", "-1", -1, 2, "",
               "temperature of requests that give none (-1: the model's generation_config.json, else 1)", true),
          real("default_top_p", "-1", -1, 1, "",
               "top_p of requests that give none (-1 or 0: the model's generation_config.json, else 1)", true),
          integer("default_top_k", -1, -1, 1 << 30, "tokens",
                  "top_k of requests that give none (0: off; -1: the model's generation_config.json, else off)", true),
          real("default_min_p", "-1", -1, 1, "",
               "min_p of requests that give none (-1: the model's generation_config.json, else 0)", true),
          real("default_repetition_penalty", "-1", -1, 10, "",
               "repetition_penalty of requests that give none (-1 or 0: the model's generation_config.json, else 1)",
               true),
          integer("default_max_tokens", 0, 0, 1 << 30, "tokens",
                  "max_tokens of requests that give none (0: the model's max_new_tokens, else 16 for completions "
                  "and the context for chat)",
                  true),
          real("admin_stream_interval", "1", 0.05, 60, "s", "default period of /admin/stream snapshots"),
          integer("admin_audit_entries", 1000, 1, 1 << 20, "entries", "audit log entries /admin/audit keeps"),
          text("test_io_fault_marker", "", {},
               "testing only: an HTTP request whose target contains this text makes the I/O handler that read it "
               "throw std::bad_alloc (that connection closes, the thread serves on; empty: never)"),
      },
      "server");
}

}  // namespace troupe
