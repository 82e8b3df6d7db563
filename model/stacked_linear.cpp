#include "model/stacked_linear.hpp"

#include <stdexcept>

namespace troupe {

stacked_linear prepare_stacked_linear(backend& device, std::span<const host_tensor> parts,
                                      std::span<const host_tensor> biases,
                                      std::span<const weight_quantization> formats) {
  if (parts.empty()) throw std::invalid_argument("a stacked linear needs at least one part");
  if (formats.size() != parts.size()) throw std::invalid_argument("a stacked linear needs one format per part");
  if (!biases.empty() && biases.size() != parts.size())
    throw std::invalid_argument("a stacked linear needs one bias per part or none");
  stacked_linear stack;
  std::int64_t column = 0;
  for (std::size_t begin = 0; begin < parts.size();) {
    std::size_t end = begin + 1;
    while (end < parts.size() && formats[end] == formats[begin]) ++end;
    const std::span<const host_tensor> run_biases = biases.empty() ? biases : biases.subspan(begin, end - begin);
    stack.pieces.push_back(
        {device.prepare_quantized_linear(parts.subspan(begin, end - begin), run_biases, formats[begin]), column});
    for (std::size_t i = begin; i < end; ++i) column += parts[i].matrix_rows();
    begin = end;
  }
  return stack;
}

void run_stacked_linear(backend& device, tensor_view x, const stacked_linear& stack, tensor_view out) {
  for (const stacked_linear::piece& piece : stack.pieces)
    device.linear(x, *piece.weight, out.col_slice(piece.first_column, piece.weight->out_features()));
}

}  // namespace troupe
