#pragma once
// The CPU backend: its options and factory. See kernels/cpu/README.md.

#include <memory>
#include <optional>

#include "kernels/backend.hpp"
#include "kernels/cpu/cpu_features.hpp"

namespace troupe::cpu {

/// Where prepared linear weights and uploaded tables live.
enum class weight_placement {
  copy,    ///< copied into anonymous 2 MiB-aligned memory advised for huge pages (default: faster decode)
  mapped,  ///< used in place from the checkpoint mapping when no stacking or conversion is needed
};

/// How a CPU backend is built.
struct cpu_backend_options {
  int threads = 0;                   ///< threads per op including the caller; 0 = all available cores
  std::optional<isa_level> max_isa;  ///< cap on the kernel dispatch level (tests force each path); default: detected
  weight_placement weights = weight_placement::copy;
  int gemv_max_rows = -1;  ///< linear uses the skinny GEMM for M <= this, oneDNN above; -1 = default
  /// Quantised weights: the integer GEMV / GEMM for M <= this, dequantised
  /// oneDNN panels above; -1 = default_quantized_gemv_max_rows(level).
  int quantized_gemv_max_rows = -1;
  /// Every op computes each output row in one fixed order whatever the row
  /// count, the batch and the chunking (linear: the panel, integer or skinny
  /// GEMM for every M, never oneDNN; gemv_max_rows ignored). See README.md
  /// for what it guarantees and costs.
  bool batch_invariant = false;
  /// Copied bf16 weights are packed into output panels where the level has
  /// the panel GEMM (AVX2 and the AVX-512 levels): linear then runs it for every M
  /// (gemv_max_rows does not apply), and it is batch-invariant by
  /// construction. Off: row-major, skinny GEMM and oneDNN as for f32.
  bool bf16_panels = true;
};

/// Creates a CPU backend. Throws std::invalid_argument when max_isa exceeds
/// what this CPU supports.
std::unique_ptr<backend> make_cpu_backend(const cpu_backend_options& options = {});

/// Skinny-GEMM row limits used when cpu_backend_options::gemv_max_rows is -1
/// (measured crossovers with oneDNN): bf16 weights where oneDNN computes in
/// bf16 (AVX-512 BF16), and everything else (f32, f16, widened bf16).
inline constexpr int default_gemv_max_rows_bf16 = 16;
inline constexpr int default_gemv_max_rows_other = 32;

/// Whether copied bf16 weights go into panels at `level` (cpu_backend_options::bf16_panels).
bool bf16_panels_at(isa_level level);

/// The quantised path's row limit when cpu_backend_options::quantized_gemv_max_rows is -1.
int default_quantized_gemv_max_rows(isa_level level);

}  // namespace troupe::cpu
