#pragma once
// Loads a transformers-made fixture model (tests/fixtures/models/<name>) onto
// a backend (the CPU one unless told), with the reference logits and greedy
// continuations that transformers recorded for it
// (tools/fixtures/make_forward_fixtures.py). The GPU tests use it too.

#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "model/batch_runner.hpp"
#include "model/checkpoint.hpp"
#include "model/llama_model.hpp"
#include "model/npy.hpp"
#include "tests/model/model_test_util.hpp"  // relative_max_error

namespace troupe::testing {

/// The backend a fixture model runs on.
struct backend_choice {
  int threads = 2;
  bool batch_invariant = false;  ///< the backend's batch-invariant mode (backend_options)
  std::string device = "cpu";    ///< "cpu" or "cuda"
  weight_quantization quantization = weight_quantization::none;  ///< linear layers converted at load
  std::optional<weight_quantization> lm_head;                    ///< the LM head's format (none: auto)
};

struct fixture_model {
  std::filesystem::path dir;
  checkpoint ckpt;
  std::unique_ptr<backend> device;
  std::unique_ptr<llama_model> model;
  std::string dtype_name;
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<npy_array> logits;
  std::vector<std::vector<std::int32_t>> greedy;

  /// The fixtures folder: $TROUPE_FIXTURES_DIR when set (test binaries
  /// carried to another machine), else the source tree's.
  static std::filesystem::path fixtures_dir() {
    const char* moved = std::getenv("TROUPE_FIXTURES_DIR");
    return moved != nullptr && *moved != '\0' ? std::filesystem::path(moved)
                                              : std::filesystem::path(TROUPE_FIXTURES_DIR);
  }

  /// Loads fixture model `name` (a folder of tests/fixtures/models) onto `choice`.
  static fixture_model load(const std::string& name, const backend_choice& choice = {}) {
    const auto& [threads, batch_invariant, device, quantization, lm_head] = choice;
    const auto dir = fixtures_dir() / "models" / name;
    checkpoint_options options;
    options.show_progress = false;
    backend_options backend_settings;
    backend_settings.threads = threads;
    backend_settings.batch_invariant = batch_invariant;
    fixture_model f{dir, checkpoint::open(dir, options), make_backend(device, backend_settings), nullptr, {}, {}, {},
                    {}};
    f.model = std::make_unique<llama_model>(f.ckpt.config(), f.ckpt.weights(), *f.device, quantization, lm_head);
    std::ifstream in(dir / "reference.json");
    std::stringstream text;
    text << in.rdbuf();
    const auto reference = boost::json::parse(text.str()).as_object();
    f.dtype_name = std::string(reference.at("dtype").as_string());
    for (const auto& prompt : reference.at("prompts").as_array()) {
      f.prompts.emplace_back();
      for (const auto& id : prompt.as_array()) f.prompts.back().push_back(static_cast<std::int32_t>(id.as_int64()));
    }
    for (const auto& file : reference.at("logits_files").as_array())
      f.logits.push_back(read_npy(dir / std::string(file.as_string())));
    for (const auto& tokens : reference.at("greedy").as_array()) {
      f.greedy.emplace_back();
      for (const auto& id : tokens.as_array()) f.greedy.back().push_back(static_cast<std::int32_t>(id.as_int64()));
    }
    return f;
  }
};

/// `length` random ids in [3, vocab).
inline std::vector<std::int32_t> random_prompt(std::mt19937& rng, int length, std::int64_t vocab) {
  std::uniform_int_distribution<int> id(3, static_cast<int>(vocab) - 1);
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(length));
  for (auto& t : prompt) t = id(rng);
  return prompt;
}

/// Greedy requests for the fixture's prompts, as long as the continuations
/// transformers recorded.
inline std::vector<runner_request> greedy_requests(const fixture_model& f) {
  std::vector<runner_request> requests;
  for (const auto& prompt : f.prompts) {
    runner_request r;
    r.prompt = prompt;
    r.params.temperature = 0.0f;
    r.max_tokens = static_cast<int>(f.greedy[0].size());
    requests.push_back(r);
  }
  return requests;
}

/// Eight seeded requests to share steps with a target: random prompts of 3,
/// 12, ..., 66 tokens, temperature 1 with `top_p`, request i generating
/// 5 + i * `tokens_step` tokens.
inline std::vector<runner_request> seeded_neighbours(const fixture_model& f, float top_p, int tokens_step) {
  std::mt19937 rng(8);
  std::vector<runner_request> batch;
  for (int i = 0; i < 8; ++i) {
    runner_request other;
    other.prompt = random_prompt(rng, 3 + 9 * i, f.model->vocab_size());
    other.params.temperature = 1.0f;
    other.params.top_p = top_p;
    other.seed = static_cast<std::uint64_t>(i);
    other.max_tokens = 5 + tokens_step * i;
    batch.push_back(other);
  }
  return batch;
}

/// Logits of every position of every prompt on `model`, in 64-token chunks.
inline std::vector<std::vector<float>> logits_of(llama_model& model,
                                                 const std::vector<std::vector<std::int32_t>>& prompts) {
  batch_runner runner(model, runner_options{});
  return runner.prompt_logits(prompts, 64);
}

}  // namespace troupe::testing
