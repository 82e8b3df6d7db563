#pragma once
// A one-line progress display on stderr for long file operations (loading
// and writing checkpoints). Drawn only when stderr is a terminal, so logs and
// pipes stay clean.

#include <cstdint>
#include <string>

namespace troupe {

/// Shows "<label>: 42% (1.3 / 3.1 GB)" on stderr, redrawn in place.
class terminal_progress {
 public:
  /// `total` is in bytes; `enabled` false draws nothing.
  terminal_progress(std::string label, std::uint64_t total, bool enabled);
  terminal_progress(const terminal_progress&) = delete;
  terminal_progress& operator=(const terminal_progress&) = delete;
  /// Ends the line if anything was drawn.
  ~terminal_progress();

  /// Records that `done` of `total` bytes are finished; redraws when the
  /// percentage changes.
  void update(std::uint64_t done);

  /// True when stderr is a terminal.
  static bool stderr_is_terminal();

 private:
  std::string label_;
  std::uint64_t total_;
  bool enabled_;
  int last_percent_ = -1;
};

}  // namespace troupe
