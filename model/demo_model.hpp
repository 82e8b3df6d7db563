#pragma once
// The built-in demo pair: a small Llama trained by tools/train/ on openly
// licensed English (troupe-demo-en) and its distilled two-layer draft
// (troupe-demo-en-draft), both embedded in the binary (model/demo/) so that
// every command runs without downloading anything. They are written once to
// the user's cache directory and reused afterwards. (Random-weight models
// for tests come from make_model.)

#include <filesystem>

namespace troupe {

/// Where the demo target lives: <cache>/demo-<version>/troupe-demo-en, the
/// cache being $XDG_CACHE_HOME/troupe, else ~/.cache/troupe, else
/// <temp>/troupe-cache. The version is a hash of the embedded bytes, so a
/// new model never reuses an old copy.
std::filesystem::path demo_model_path();

/// The draft beside it: <cache>/demo-<version>/troupe-demo-en-draft.
std::filesystem::path demo_draft_model_path();

/// Returns demo_model_path(), writing the pair first when it is missing or
/// incomplete. Safe when several processes call it at once: each writes a
/// private staging directory and renames it into place; the first rename
/// wins and the others discard their copy (every copy is identical).
/// Throws std::runtime_error when the cache directory cannot be written.
std::filesystem::path ensure_demo_model();

/// Same, under `cache_root` instead of the user's cache directory.
std::filesystem::path ensure_demo_model(const std::filesystem::path& cache_root);

/// Returns demo_draft_model_path(), writing the pair first when needed.
std::filesystem::path ensure_demo_draft_model();

/// Same, under `cache_root`.
std::filesystem::path ensure_demo_draft_model(const std::filesystem::path& cache_root);

}  // namespace troupe
