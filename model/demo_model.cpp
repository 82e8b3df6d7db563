#include "model/demo_model.hpp"

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "model/embedded_demo.hpp"
#include "model/make_model.hpp"

namespace troupe {

namespace {

std::filesystem::path cache_root() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') return std::filesystem::path(xdg) / "troupe";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home == '/') return std::filesystem::path(home) / ".cache" / "troupe";
  return std::filesystem::temp_directory_path() / "troupe-cache";
}

std::filesystem::path pair_directory(const std::filesystem::path& root) {
  return root / ("demo-" + std::string(embedded_demo_version()));
}

// A published directory is complete by construction (it appears by one
// rename); this guards against one damaged by hand afterwards.
bool is_complete(const std::filesystem::path& pair) {
  std::error_code error;
  for (const embedded_model& model : embedded_demo_models()) {
    for (const embedded_file& file : model.files) {
      const std::filesystem::path path = pair / model.name / file.name;
      if (!std::filesystem::is_regular_file(path, error) ||
          std::filesystem::file_size(path, error) != file.bytes.size())
        return false;
    }
  }
  return true;
}

void write_pair(const std::filesystem::path& directory) {
  for (const embedded_model& model : embedded_demo_models()) {
    const std::filesystem::path model_dir = directory / model.name;
    std::filesystem::create_directories(model_dir);
    for (const embedded_file& file : model.files) {
      std::ofstream out(model_dir / file.name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(file.bytes.data()), static_cast<std::streamsize>(file.bytes.size()));
      if (!out.flush()) throw std::runtime_error((model_dir / file.name).string() + ": cannot write the demo model");
    }
  }
}

std::filesystem::path ensure_pair(const std::filesystem::path& root) {
  const std::filesystem::path target = pair_directory(root);
  if (is_complete(target)) return target;
  std::error_code error;
  std::filesystem::create_directories(root, error);
  if (error) throw std::runtime_error(root.string() + ": cannot create the cache directory: " + error.message());
  if (std::filesystem::exists(target, error)) {
    // Damaged: move it aside atomically so a concurrent reader never sees it half-deleted.
    const std::filesystem::path aside = staging_path_for(target);
    std::filesystem::rename(target, aside, error);
    std::filesystem::remove_all(aside, error);
  }
  const std::filesystem::path staging = staging_path_for(target);
  std::filesystem::create_directories(staging);
  try {
    write_pair(staging);
    if (!publish_directory(staging, target)) std::filesystem::remove_all(staging);
  } catch (...) {
    std::filesystem::remove_all(staging, error);
    throw;
  }
  if (!is_complete(target)) throw std::runtime_error(target.string() + ": demo model is incomplete after creation");
  return target;
}

}  // namespace

std::filesystem::path demo_model_path() { return pair_directory(cache_root()) / "troupe-demo-en"; }

std::filesystem::path demo_draft_model_path() { return pair_directory(cache_root()) / "troupe-demo-en-draft"; }

std::filesystem::path ensure_demo_model() { return ensure_demo_model(cache_root()); }

std::filesystem::path ensure_demo_model(const std::filesystem::path& root) {
  return ensure_pair(root) / "troupe-demo-en";
}

std::filesystem::path ensure_demo_draft_model() { return ensure_demo_draft_model(cache_root()); }

std::filesystem::path ensure_demo_draft_model(const std::filesystem::path& root) {
  return ensure_pair(root) / "troupe-demo-en-draft";
}

}  // namespace troupe
