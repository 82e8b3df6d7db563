// AVX-512 + AVX512_VNNI kernels: the int8/int4 GEMV with vpdpbusd on 512-bit
// vectors, for CPUs with VNNI but no BF16 (per-file flags in kernels/CMakeLists.txt).
// Include rule: see isa_kernels.hpp (no standard-library or shared inline code here).

#define TROUPE_ISA_NS isa_avx512_vnni
#include "kernels/cpu/isa_table_impl.hpp"

namespace troupe::cpu {

namespace TROUPE_ISA_NS {
constexpr isa_kernels table = make_table("avx512_vnni");
}

const isa_kernels& isa_kernels_avx512_vnni() { return TROUPE_ISA_NS::table; }

}  // namespace troupe::cpu
