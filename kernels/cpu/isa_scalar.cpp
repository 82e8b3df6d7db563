// Baseline x86-64 kernels (no -m flags).
// Include rule: see isa_kernels.hpp (no standard-library or shared inline code here).

#define TROUPE_ISA_NS isa_scalar
#include "kernels/cpu/isa_table_impl.hpp"

namespace troupe::cpu {

namespace TROUPE_ISA_NS {
constexpr isa_kernels table = make_table("scalar");
}

const isa_kernels& isa_kernels_scalar() { return TROUPE_ISA_NS::table; }

}  // namespace troupe::cpu
