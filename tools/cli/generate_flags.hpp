#pragma once
// `troupe generate`'s flags and the two ways it runs: the batch runner
// (the reference path, no actors) and, when speculative decoding is asked
// for, the embedded engine, where speculation lives.

#include <optional>
#include <string>
#include <vector>

#include "kernels/sampling.hpp"
#include "model/generation_config.hpp"
#include "tools/cli/cli_model.hpp"

namespace troupe::cli {

/// Speculative decoding flags; names and meaning as the engine knobs of the same names.
struct speculation_flags {
  std::string speculative = "off";          ///< off | ngram | draft | layerskip
  int num_speculative_tokens = 4;           ///< drafts per sequence and step at most
  std::string draft_model;                  ///< draft: HF directory (empty: the demo draft)
  std::string draft_quantization = "auto";  ///< draft: auto (as --quantization) | none | int8 | int4 | int4_asym |
                                            ///< int5_asym | int4_nl | int6 | int4_g16
  std::int64_t draft_vocab_size = 0;        ///< draft: its LM head scores ids [0, this) only (0: every id)
  std::string speculative_skip_layers;
  int speculative_tree_width = 1;  ///< draft tree branches (1: chains)
  int draft_threads = 0;           ///< draft, layerskip: the drafter's CPU threads (0: as many as --threads)
  std::string speculative_draft_ahead = "auto";  ///< draft the next round during verification: auto | on | off
  bool speculative_turn_down = true;             ///< false: every decode speculates, whatever the measured costs
};

struct generate_flags {
  model_flags model;
  speculation_flags speculation;
  std::vector<std::string> prompts;
  std::vector<std::string> prompt_ids;
  int max_tokens = 64;
  int min_tokens = 0;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<std::uint64_t> seed;
  bool ignore_eos = false;
  std::string stop_token_ids;
  int logprobs = -1;
  bool json = false;
  bool engine = false;           ///< through the embedded engine even without speculation
  bool batch_invariant = false;  ///< engine path: the batch_invariant knob
};

/// The flags' sampling rules; generation_config.json supplies what a flag does not set.
sampling_params sampling_from(const generate_flags& flags, const generation_config& defaults);

/// Runs the prompts through an embedded engine with `flags.speculation`,
/// all at once (the batch is the number of prompts), prints each output as
/// the batch path does, and reports decode speed and acceptance on stderr.
void generate_with_engine(const generate_flags& flags);

}  // namespace troupe::cli
