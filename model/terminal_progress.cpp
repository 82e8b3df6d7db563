#include "model/terminal_progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace troupe {

terminal_progress::terminal_progress(std::string label, std::uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled) {}

terminal_progress::~terminal_progress() {
  if (enabled_ && last_percent_ >= 0) std::fputc('\n', stderr);
}

bool terminal_progress::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

void terminal_progress::update(std::uint64_t done) {
  if (!enabled_) return;
  const int percent =
      total_ == 0 ? 100 : static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total_));
  if (percent == last_percent_) return;
  last_percent_ = percent;
  constexpr double gigabyte = 1e9;
  std::fprintf(stderr, "\r%s: %3d%% (%.2f / %.2f GB)", label_.c_str(), percent, static_cast<double>(done) / gigabyte,
               static_cast<double>(total_) / gigabyte);
  std::fflush(stderr);
}

}  // namespace troupe
