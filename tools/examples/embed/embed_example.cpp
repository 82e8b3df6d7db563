// Embedding Troupe in a C++ program, both ways:
//  1. engine::start — the troupe in an actor system of its own; events
//     arrive through callbacks (callback_sink);
//  2. start_engine_in — the troupe inside this program's own CAF actor
//     system; events arrive as messages to one of this program's actors.
// Usage: embed_example [MODEL_DIR] [MAX_TOKENS]   (no MODEL_DIR: the demo model)
// Prints one line per event; the test suite runs it and checks the lines.

#include <caf/all.hpp>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <troupe/engine.hpp>
#include <troupe/engine_caf.hpp>

namespace {

troupe::generation_request make_request(int max_tokens) {
  troupe::generation_request request;
  request.kind = troupe::prompt_kind::text;
  request.prompt_text = "The troupe performs";
  request.max_tokens = max_tokens;
  request.sampling.temperature = 0.0f;  // greedy: both runs must agree
  request.ignore_eos = true;
  return request;
}

// Prints a line per event and lets main() wait for the end.
struct printer {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;

  void line(const std::string& text) {
    std::lock_guard lock(mutex);
    std::cout << text << std::endl;
  }
  void finish() {
    std::lock_guard lock(mutex);
    done = true;
    done_cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [this] { return done; });
    done = false;
  }
};

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c < 0x20) {
      out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void run_with_callbacks(const troupe::engine_config& config, int max_tokens, printer& out) {
  auto engine = troupe::engine::start(config);
  auto sink = std::make_shared<troupe::callback_sink>();
  sink->accepted = [&](const troupe::accepted_event& e) {
    out.line("callbacks accepted " + std::to_string(e.prompt_tokens));
  };
  sink->delta = [&](const troupe::delta_event& e) { out.line("callbacks delta " + quoted(e.text)); };
  sink->finished = [&](const troupe::finished_event& e) {
    out.line(std::string("callbacks finished ") + troupe::finish_reason_name(e.reason) + " " +
             std::to_string(e.usage.completion_tokens));
    if (e.request_done) out.finish();
  };
  sink->error = [&](const troupe::error_event& e) {
    out.line("callbacks error " + e.message);
    out.finish();
  };
  engine->submit(make_request(max_tokens), sink);
  out.wait();
  engine->shutdown(std::chrono::seconds(1));
}

void run_in_own_actor_system(const troupe::engine_config& config, int max_tokens, printer& out) {
  caf::actor_system_config cfg;
  troupe::add_message_types(cfg);
  caf::actor_system system{cfg};
  auto engine = troupe::start_engine_in(system, config);
  // The printer goes in as a spawn argument, not a capture: CAF 0.17
  // binds a reference through a null pointer when it starts a function
  // actor that takes no arguments (undefined behaviour, which UBSan stops).
  auto listener = system.spawn(
      [](caf::event_based_actor*, printer* out) -> caf::behavior {
        return {
            [out](const troupe::accepted_event& e) { out->line("actor accepted " + std::to_string(e.prompt_tokens)); },
            [out](const troupe::delta_event& e) { out->line("actor delta " + quoted(e.text)); },
            [out](const troupe::finished_event& e) {
              out->line(std::string("actor finished ") + troupe::finish_reason_name(e.reason) + " " +
                        std::to_string(e.usage.completion_tokens));
              if (e.request_done) out->finish();
            },
            [out](const troupe::error_event& e) {
              out->line("actor error " + e.message);
              out->finish();
            },
        };
      },
      &out);
  troupe::submit_to_actor(*engine, make_request(max_tokens), listener);
  out.wait();
  engine->shutdown(std::chrono::seconds(1));
  caf::anon_send_exit(listener, caf::exit_reason::user_shutdown);
}

}  // namespace

int main(int argc, char** argv) {
  troupe::engine_config config;
  if (argc > 1) config.model_dir = argv[1];
  const int max_tokens = argc > 2 ? std::stoi(argv[2]) : 16;
  config.device = "cpu";
  config.kv_cache_bytes = 64 << 20;
  config.swap_space_bytes = 0;
  try {
    printer out;
    run_with_callbacks(config, max_tokens, out);
    run_in_own_actor_system(config, max_tokens, out);
  } catch (const std::exception& e) {
    std::cerr << "embed_example: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
