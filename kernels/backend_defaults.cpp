// The backend base class's default behaviour, apart from the factory in
// backend.cpp (which pulls in every backend): the GPU emulator links this
// file alone (tests/gpu/emulator/run.sh).
#include <stdexcept>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/quantization.hpp"

namespace troupe {

std::unique_ptr<linear_weight> backend::prepare_quantized_linear(std::span<const host_tensor> parts,
                                                                 std::span<const host_tensor> biases,
                                                                 weight_quantization format) {
  if (format == weight_quantization::none) return prepare_linear(parts, biases);
  throw std::runtime_error("backend \"" + name() + "\" has no kernels for " + std::string(quantization_name(format)) +
                           " weights (use the cpu backend or quantization none)");
}

void backend::refine_logits(tensor_view, tensor_view, int, tensor_view) {
  throw std::logic_error("backend \"" + name() + "\" cannot refine logits");
}

}  // namespace troupe
