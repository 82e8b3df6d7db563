#include "tools/cli/serve_config.hpp"

#include <chrono>

namespace troupe::cli {

namespace {

int as_int(const config_store& knobs, std::string_view name) { return static_cast<int>(knobs.get_int(name)); }

std::chrono::milliseconds as_ms(const config_store& knobs, std::string_view name) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(knobs.get_real(name) * 1000.0));
}

}  // namespace

engine_config to_engine_config(const config_store& knobs) {
  engine_config c;
  c.model_dir = knobs.get_text("model");
  c.served_model_name = knobs.get_text("served_model_name");
  c.device = knobs.get_text("device");
  c.threads = as_int(knobs, "threads");
  c.max_num_batched_tokens = as_int(knobs, "max_num_batched_tokens");
  c.max_num_seqs = as_int(knobs, "max_num_seqs");
  c.max_prefill_chunk = as_int(knobs, "max_prefill_chunk");
  c.block_size = as_int(knobs, "block_size");
  c.kv_cache_bytes = knobs.get_int("kv_cache_bytes");
  c.swap_space_bytes = knobs.get_int("swap_space_bytes");
  c.max_model_len = as_int(knobs, "max_model_len");
  c.policy = knobs.get_text("policy");
  c.preemption_mode = knobs.get_text("preemption_mode");
  c.enable_prefix_caching = knobs.get_bool("enable_prefix_caching");
  c.max_waiting_requests = as_int(knobs, "max_waiting_requests");
  c.max_n = as_int(knobs, "max_n");
  c.max_stop_strings = as_int(knobs, "max_stop_strings");
  c.max_stop_string_bytes = as_int(knobs, "max_stop_string_bytes");
  c.max_logit_bias = as_int(knobs, "max_logit_bias");
  c.max_top_logprobs = as_int(knobs, "max_top_logprobs");
  c.tokenizer_workers = as_int(knobs, "tokenizer_workers");
  c.request_timeout_s = knobs.get_real("request_timeout");
  c.batch_invariant = knobs.get_bool("batch_invariant");
  c.test_fail_executor_after_steps = as_int(knobs, "test_fail_executor_after_steps");
  return c;
}

api::server_config to_server_config(const config_store& knobs, const engine_config& engine) {
  api::server_config s;
  s.host = knobs.get_text("host");
  s.port = static_cast<std::uint16_t>(knobs.get_int("port"));
  s.api_key = knobs.get_text("api_key");
  s.io_threads = as_int(knobs, "io_threads");
  s.worker_threads = as_int(knobs, "worker_threads");
  s.max_body_bytes = static_cast<std::size_t>(knobs.get_int("max_body_bytes"));
  s.max_header_bytes = static_cast<std::uint32_t>(knobs.get_int("max_header_bytes"));
  s.idle_timeout = as_ms(knobs, "idle_timeout");
  s.read_timeout = as_ms(knobs, "read_timeout");
  s.write_timeout = as_ms(knobs, "write_timeout");
  s.max_connections = as_int(knobs, "max_connections");
  s.max_stream_queue_bytes = static_cast<std::size_t>(knobs.get_int("stream_queue_bytes"));
  s.max_ws_requests = as_int(knobs, "max_ws_requests");
  s.limits = api::request_limits::from_engine_config(engine);
  s.version = TROUPE_VERSION;
  return s;
}

}  // namespace troupe::cli
