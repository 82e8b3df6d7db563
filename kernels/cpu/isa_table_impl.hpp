#pragma once
// Assembles one dispatch level's kernel table. Included only by the ISA units.

#include "kernels/cpu/attention_impl.hpp"
#include "kernels/cpu/elementwise_impl.hpp"
#include "kernels/cpu/gemv_impl.hpp"
#include "kernels/cpu/panel_gemm_impl.hpp"
#include "kernels/cpu/qdequantize_impl.hpp"
#include "kernels/cpu/qgemm_impl.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

#if defined(TROUPE_HAVE_PANEL_GEMM)
constexpr void (*panel_gemm_entry)(const panel_gemm_args&) = bf16_panel_gemm;
#else
constexpr void (*panel_gemm_entry)(const panel_gemm_args&) = nullptr;
#endif

constexpr isa_kernels make_table(const char* name) {
  return isa_kernels {
    .name = name,
#if defined(__AVX512BF16__)
    .bf16_dot = true,
#else
    .bf16_dot = false,
#endif
    .gemv = gemv, .bf16_panel_gemm = panel_gemm_entry, .from_f32 = from_f32, .to_f32 = to_f32,
    .rms_norm_row = rms_norm_row, .add_rms_norm_row = add_rms_norm_row, .silu_mul_row = silu_mul_row,
    .rope_row = rope_row, .attention = attention, .attention_merge = attention_merge, .qgemv = qgemv,
    .quantize_row = quantize_row, .dequantize_rows = dequantize_rows, .row_max = row_max, .sum_exp = sum_exp,
    .exp_scaled = exp_scaled,
  };
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
