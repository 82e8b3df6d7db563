#pragma once
// Which x86 vector instruction sets this process may use, detected once with
// cpuid/xgetbv (CPU support and OS-enabled register state).

#include <optional>
#include <string_view>

namespace troupe::cpu {

/// Kernel dispatch levels, each a superset of the one before.
enum class isa_level : int {
  scalar = 0,       ///< baseline x86-64, no vector kernels beyond what the compiler emits
  avx2 = 1,         ///< AVX2 + FMA + F16C
  avx512 = 2,       ///< AVX-512 F/BW/VL/DQ (+ AVX2 set)
  avx512_vnni = 3,  ///< AVX-512 plus AVX512_VNNI (vpdpbusd: the int8/int4 kernels at full width)
  avx512_bf16 = 4,  ///< AVX-512 plus AVX512_BF16 (vdpbf16ps) and AVX512_VNNI
};

/// The best level this CPU and OS support (computed once, then cached).
isa_level detected_isa();

/// Lower-case name ("scalar", "avx2", "avx512", "avx512_vnni", "avx512_bf16").
std::string_view isa_name(isa_level level);

/// Parses an isa_name() string.
std::optional<isa_level> parse_isa(std::string_view name);

struct isa_kernels;

/// The kernel table of `level` (isa_kernels.hpp).
const isa_kernels& kernels_for(isa_level level);

/// Levels this machine can run, scalar first (used by tests to force each path).
inline bool isa_supported(isa_level level) { return static_cast<int>(level) <= static_cast<int>(detected_isa()); }

}  // namespace troupe::cpu
