#include "kernels/cpu/cpu_features.hpp"

#include <cstdint>

#include "kernels/cpu/isa_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace troupe::cpu {

namespace {

#if defined(__x86_64__) || defined(__i386__)
struct cpuid_regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

cpuid_regs query(unsigned leaf, unsigned subleaf) {
  cpuid_regs r;
  if (__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) return {};
  return r;
}

// XCR0: which register states the OS saves on context switch. Without these
// bits the instructions fault even when cpuid lists them.
std::uint64_t enabled_register_state() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned value, int index) { return ((value >> index) & 1u) != 0; }

isa_level detect() {
  const cpuid_regs leaf1 = query(1, 0);
  const bool osxsave = bit(leaf1.ecx, 27);
  if (!osxsave || !bit(leaf1.ecx, 28)) return isa_level::scalar;  // no AVX or no OS support
  const std::uint64_t xcr0 = enabled_register_state();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;
  const cpuid_regs leaf7 = query(7, 0);
  const bool fma = bit(leaf1.ecx, 12), f16c = bit(leaf1.ecx, 29), avx2 = bit(leaf7.ebx, 5);
  if (!ymm_state || !fma || !f16c || !avx2) return isa_level::scalar;
  const bool avx512 =
      bit(leaf7.ebx, 16) && bit(leaf7.ebx, 17) && bit(leaf7.ebx, 30) && bit(leaf7.ebx, 31);  // F DQ BW VL
  if (!zmm_state || !avx512) return isa_level::avx2;
  const cpuid_regs leaf7_1 = query(7, 1);
  // Every CPU with AVX512_BF16 also has AVX512_VNNI; the level needs both.
  // VNNI without BF16 (Cascade Lake, Ice Lake) is a level of its own.
  if (!bit(leaf7.ecx, 11)) return isa_level::avx512;
  return bit(leaf7_1.eax, 5) ? isa_level::avx512_bf16 : isa_level::avx512_vnni;
}
#else
isa_level detect() { return isa_level::scalar; }
#endif

}  // namespace

isa_level detected_isa() {
  static const isa_level level = detect();
  return level;
}

std::string_view isa_name(isa_level level) {
  switch (level) {
    case isa_level::scalar:
      return "scalar";
    case isa_level::avx2:
      return "avx2";
    case isa_level::avx512:
      return "avx512";
    case isa_level::avx512_vnni:
      return "avx512_vnni";
    case isa_level::avx512_bf16:
      return "avx512_bf16";
  }
  return "?";
}

std::optional<isa_level> parse_isa(std::string_view name) {
  for (isa_level level :
       {isa_level::scalar, isa_level::avx2, isa_level::avx512, isa_level::avx512_vnni, isa_level::avx512_bf16}) {
    if (isa_name(level) == name) return level;
  }
  return std::nullopt;
}

const isa_kernels& kernels_for(isa_level level) {
  switch (level) {
    case isa_level::scalar:
      return isa_kernels_scalar();
    case isa_level::avx2:
      return isa_kernels_avx2();
    case isa_level::avx512:
      return isa_kernels_avx512();
    case isa_level::avx512_vnni:
      return isa_kernels_avx512_vnni();
    case isa_level::avx512_bf16:
      return isa_kernels_avx512_bf16();
  }
  return isa_kernels_scalar();
}

}  // namespace troupe::cpu
