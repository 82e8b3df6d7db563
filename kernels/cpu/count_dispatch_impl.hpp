#pragma once
// A run-time count (1..MAX) turned into a template argument, for kernels
// whose accumulators must be sized at compile time to stay in registers.
// Included only by the ISA units' *_impl.hpp headers.

#include <cstdint>

#include "kernels/cpu/isa_kernels.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

/// Calls fn.template operator()<N>() with N = count clamped to [1, MAX].
template <int MAX, class F>
[[gnu::always_inline]] inline void with_count(std::int64_t count, F&& fn) {
  if constexpr (MAX > 1) {
    if (count < MAX) {
      with_count<MAX - 1>(count, fn);
      return;
    }
  }
  fn.template operator()<MAX>();
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
