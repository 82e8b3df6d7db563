#pragma once
// A linear weight its checkpoint stores in a block format the backend has
// no exact home for (GGUF Q8_0, Q5_0 / Q5_1 / Q5_K, Q6_K; Q4_K beside
// another 4-bit format): the loader hands the backend this reader instead
// of a copy expanded to floats, and the backend expands and quantises a
// few rows at a time, so a load never holds the whole model in floats next
// to its quantised form.

#include <cstdint>

namespace troupe {

/// Reads one [rows][cols] matrix as floats, a block of rows at a time.
class row_source {
 public:
  virtual ~row_source() = default;

  /// Writes rows [first, first + count) as f32 [count][cols], every weight
  /// at its natural input position. Thread-safe: tasks read disjoint rows at once.
  virtual void read_rows(std::int64_t first, std::int64_t count, float* out) const = 0;
};

}  // namespace troupe
