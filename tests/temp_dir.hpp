#pragma once
// Temporary directories for tests, removed when they go out of scope, so that
// a ctest run (one process per test) leaves nothing behind in /tmp.

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

namespace troupe::testing {

/// A fresh directory `<system temp>/<prefix>-<pid>-<n>`, removed with its
/// contents on destruction.
class temp_dir {
 public:
  explicit temp_dir(const std::string& prefix = "troupe-model-test") {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// One directory per test process for files that live as long as it (the
/// engine tests' model copies); removed when the process exits normally.
inline const std::filesystem::path& process_scratch_dir() {
  static const temp_dir dir("troupe-test-scratch");
  return dir.path();
}

}  // namespace troupe::testing
