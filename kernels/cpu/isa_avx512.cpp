// AVX-512 F/BW/VL/DQ kernels (per-file flags in kernels/CMakeLists.txt).
// Include rule: see isa_kernels.hpp (no standard-library or shared inline code here).

#define TROUPE_ISA_NS isa_avx512
#include "kernels/cpu/isa_table_impl.hpp"

namespace troupe::cpu {

namespace TROUPE_ISA_NS {
constexpr isa_kernels table = make_table("avx512");
}

const isa_kernels& isa_kernels_avx512() { return TROUPE_ISA_NS::table; }

}  // namespace troupe::cpu
