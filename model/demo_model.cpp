#include "model/demo_model.hpp"

#include <cstdlib>
#include <stdexcept>

#include "model/make_model.hpp"

namespace troupe {

namespace {

constexpr const char* demo_model_name = "demo-tiny-llama-v1";
constexpr std::uint64_t demo_model_seed = 20240501;

std::filesystem::path cache_root() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') return std::filesystem::path(xdg) / "troupe";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home == '/') return std::filesystem::path(home) / ".cache" / "troupe";
  return std::filesystem::temp_directory_path() / "troupe-cache";
}

// A published directory is complete by construction (it appears by one
// rename); this guards against one damaged by hand afterwards.
bool is_complete(const std::filesystem::path& directory) {
  std::error_code error;
  for (const char* name :
       {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
    if (!std::filesystem::is_regular_file(directory / name, error)) return false;
  }
  return true;
}

}  // namespace

std::filesystem::path demo_model_path() { return cache_root() / demo_model_name; }

std::filesystem::path ensure_demo_model() { return ensure_demo_model(cache_root()); }

std::filesystem::path ensure_demo_model(const std::filesystem::path& root) {
  const std::filesystem::path target = root / demo_model_name;
  if (is_complete(target)) return target;
  std::error_code error;
  std::filesystem::create_directories(root, error);
  if (error) throw std::runtime_error(root.string() + ": cannot create the cache directory: " + error.message());
  if (std::filesystem::exists(target, error) && !is_complete(target)) {
    // Damaged: move it aside atomically so a concurrent reader never sees it half-deleted.
    const std::filesystem::path aside = staging_path_for(target);
    std::filesystem::rename(target, aside, error);
    std::filesystem::remove_all(aside, error);
  }
  make_model_options options;
  options.architecture = model_architecture::llama;
  options.preset = model_preset::tiny;
  options.type = dtype::f32;
  options.seed = demo_model_seed;
  options.output_dir = target;
  options.show_progress = false;
  const std::filesystem::path staging = staging_path_for(target);
  std::filesystem::create_directories(staging);
  try {
    write_model_files(options, staging);
    if (!publish_directory(staging, target)) std::filesystem::remove_all(staging);
  } catch (...) {
    std::filesystem::remove_all(staging, error);
    throw;
  }
  if (!is_complete(target)) throw std::runtime_error(target.string() + ": demo model is incomplete after creation");
  return target;
}

}  // namespace troupe
