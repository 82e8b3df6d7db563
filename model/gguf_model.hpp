#pragma once
// A GGUF file read as a troupe model: its metadata turned into the
// model_config / generation_config an HF directory would give, and its
// tensors converted, one at a time, into HF-named, HF-layout host tensors
// of one element type (the seam where native quantised formats plug in).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/row_source.hpp"
#include "kernels/tensor.hpp"
#include "model/generation_config.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"

namespace troupe {

/// The model configuration the metadata describes (architectures llama,
/// qwen2, qwen3), validated like config.json. Throws std::runtime_error
/// naming the file and metadata key or tensor, e.g. "m.gguf: metadata key
/// 'llama.block_count': is missing".
model_config gguf_model_config(const gguf_file& file);

/// bos/eos/pad ids from the tokenizer metadata; eos lists eos, eot and eom.
generation_config gguf_generation_config(const gguf_file& file);

/// The HF name of the GGUF tensor `gguf_name` ("blk.3.attn_q.weight" ->
/// "model.layers.3.self_attn.q_proj.weight"), or nullopt for tensors the
/// forward pass does not read.
std::optional<std::string> gguf_hf_tensor_name(std::string_view gguf_name);

/// The one element type every converted tensor gets: f32 when every tensor
/// is F32, f16 when the matrices are F16, else bf16 (BF16 and every
/// quantised type).
dtype gguf_weight_dtype(const gguf_file& file);

/// The rows of a GGUF matrix in HF order: with `rope_heads` > 0 the rows of
/// each of that many heads are taken from llama.cpp's interleaved RoPE order
/// back in HF's rotate-half order. Throws std::runtime_error naming the
/// tensor when its rows do not split into heads of an even size.
class gguf_rows {
 public:
  gguf_rows(const gguf_tensor& tensor, std::int64_t rope_heads);
  /// The file bytes of HF row `hf_row` (row_bytes of them).
  const std::byte* row(std::uint64_t hf_row) const;

  std::uint64_t row_length;  ///< elements per row (dims[0])
  std::uint64_t count;       ///< rows
  std::uint64_t row_bytes;   ///< bytes per row in the file's type

 private:
  const std::byte* data_;
  std::uint64_t head_rows_ = 0;
};

/// A reader of the 2-D `tensor` (any supported type; rows in HF order, see
/// gguf_rows for `rope_heads`) that expands rows to f32 as the backend asks
/// (kernels/row_source.hpp). The tensor's mapping must outlive it.
std::shared_ptr<const row_source> gguf_row_source(const gguf_tensor& tensor, std::int64_t rope_heads);

/// Owns the bytes of converted tensors (those that are not views into the mapping).
using gguf_buffers = std::vector<std::unique_ptr<std::byte[]>>;

/// Converts one GGUF tensor into the HF tensor `hf_name` of type `target`:
/// dims reversed into HF order, blocks dequantised, and with `rope_heads` >
/// 0 the rows of each of that many heads put back from llama.cpp's
/// interleaved RoPE order into HF's rotate-half order. A tensor already in
/// `target`, aligned and unpermuted stays a view into the mapping; others
/// are converted row by row into a buffer appended to `storage`.
host_tensor convert_gguf_tensor(const gguf_tensor& tensor, std::string hf_name, dtype target, std::int64_t rope_heads,
                                gguf_buffers& storage);

}  // namespace troupe
