#pragma once
// The built-in demo model: a tiny random-weight Llama (f32, built-in
// tokenizer with a chat template) that lets every command and test run
// without downloading anything. Created once, deterministically, in the
// user's cache directory and reused afterwards.

#include <filesystem>

namespace troupe {

/// Where the demo model lives: $XDG_CACHE_HOME/troupe/<name>, else
/// ~/.cache/troupe/<name>, else <temp>/troupe-cache/<name>. The name carries
/// a version, so a change to the generator never reuses an old copy.
std::filesystem::path demo_model_path();

/// Returns demo_model_path(), creating the model first when it is missing
/// or incomplete. Safe when several processes call it at once: each writes a
/// private staging directory and renames it into place; the first rename
/// wins and the others discard their copy (every copy is identical).
/// Throws std::runtime_error when the cache directory cannot be written.
std::filesystem::path ensure_demo_model();

/// Same, under `cache_root` instead of the user's cache directory.
std::filesystem::path ensure_demo_model(const std::filesystem::path& cache_root);

}  // namespace troupe
