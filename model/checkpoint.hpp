#pragma once
// A Hugging Face model directory opened for inference: config.json,
// generation_config.json and the memory-mapped weights (model.safetensors,
// or shards listed in model.safetensors.index.json), every tensor checked
// against the shape the config implies.
//
// Shard names in the index are checked lexically: a name that is absolute,
// empty or contains ".." is rejected. Symbolic links inside the directory are
// followed, because the HF hub cache stores every file of a snapshot as a
// link into a sibling blobs/ directory.

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/quantization.hpp"
#include "kernels/tensor.hpp"
#include "model/generation_config.hpp"
#include "model/gguf.hpp"
#include "model/gguf_model.hpp"
#include "model/model_config.hpp"
#include "model/safetensors.hpp"

namespace troupe {

/// The tensors of one decoder layer, in HF layout (matrices are
/// [out_features, in_features]). Optional tensors are nullptr when the
/// architecture has none. Shapes (H hidden, Q = heads × head_dim,
/// K = kv_heads × head_dim, I intermediate, D head_dim):
struct layer_weights {
  const host_tensor* q_proj = nullptr;               ///< [Q, H]
  const host_tensor* k_proj = nullptr;               ///< [K, H]
  const host_tensor* v_proj = nullptr;               ///< [K, H]
  const host_tensor* o_proj = nullptr;               ///< [H, Q]
  const host_tensor* q_bias = nullptr;               ///< [Q] when config.qkv_bias
  const host_tensor* k_bias = nullptr;               ///< [K] when config.qkv_bias
  const host_tensor* v_bias = nullptr;               ///< [K] when config.qkv_bias
  const host_tensor* o_bias = nullptr;               ///< [H] when config.o_bias
  const host_tensor* q_norm = nullptr;               ///< [D] when config.qk_norm
  const host_tensor* k_norm = nullptr;               ///< [D] when config.qk_norm
  const host_tensor* gate_proj = nullptr;            ///< [I, H]
  const host_tensor* up_proj = nullptr;              ///< [I, H]
  const host_tensor* down_proj = nullptr;            ///< [H, I]
  const host_tensor* input_norm = nullptr;           ///< [H] input_layernorm
  const host_tensor* post_attention_norm = nullptr;  ///< [H] post_attention_layernorm
};

/// Every tensor the forward pass reads (V vocab, H hidden).
struct model_weights {
  const host_tensor* embed_tokens = nullptr;  ///< [V, H]
  const host_tensor* final_norm = nullptr;    ///< [H] model.norm
  const host_tensor* lm_head = nullptr;       ///< [V, H]; == embed_tokens when the embeddings are tied
  std::vector<layer_weights> layers;          ///< num_hidden_layers entries
};

/// How to open a checkpoint.
struct checkpoint_options {
  bool show_progress = true;  ///< draw progress on stderr (only ever when stderr is a terminal)
  bool prefetch = false;      ///< ask the kernel to read every shard into the page cache in the background
  /// Linear layers the checkpoint stores as 4- to 6-bit groups (GGUF Q4_0 /
  /// Q4_1 / Q4_K / Q5_0 / Q5_1 / Q5_K / IQ4_NL / IQ4_XS / Q6_K / Q3_K, AWQ,
  /// GPTQ) stay in that form (host_tensor::stored_codes, read by the backend
  /// at load) instead of being expanded to bf16 here: for backends with kernels for those
  /// formats (cpu, cuda), which then must prepare each in its own format
  /// (stored_code_source::format(); mostly stored_quantization()).
  bool keep_stored_codes = false;
  /// GGUF layer matrices in other block formats (Q8_0, Q2_K, or one troupe
  /// keeps where keep_stored_codes is off) are expanded row block by row
  /// block as the backend prepares them (host_tensor::rows) instead of whole at open:
  /// for a backend that quantises them at load (cpu), so a load never holds
  /// the model expanded to bf16 beside its quantised form.
  bool expand_on_demand = false;
};

/// An open model directory. Move-only; moving keeps every tensor pointer valid.
/// The mappings live as long as the checkpoint: a backend that keeps views
/// into them (instead of copies) needs the checkpoint to outlive it.
class checkpoint {
 public:
  /// Opens and validates `directory`, or a GGUF file (is_gguf_path). Throws std::runtime_error naming the
  /// file and field, e.g. "<dir>: missing tensor 'model.norm.weight'" or
  /// "<dir>: tensor 'lm_head.weight' has shape [32, 64], expected [300, 64] from config.json".
  static checkpoint open(const std::filesystem::path& directory, const checkpoint_options& options = {});

  checkpoint(checkpoint&&) noexcept = default;
  checkpoint& operator=(checkpoint&&) noexcept = default;

  const std::filesystem::path& directory() const { return directory_; }
  const model_config& config() const { return config_; }
  /// generation_config.json, empty when the file is absent.
  const generation_config& generation() const { return generation_; }
  const model_weights& weights() const { return weights_; }
  /// Any tensor of the checkpoint by HF name (including ones the forward
  /// pass does not use), or nullptr.
  const host_tensor* find_tensor(std::string_view name) const;
  /// The open safetensors files, in shard order (none for a GGUF file).
  const std::vector<safetensors_file>& files() const { return files_; }
  /// The open GGUF file, or nullptr for an HF directory.
  const gguf_file* gguf() const { return gguf_.get(); }
  /// Bytes of all tensors in weights() (the tied lm_head counted once; a
  /// matrix kept in 4- to 6-bit form at its code bits a weight plus its scales).
  std::uint64_t weight_bytes() const;
  /// The format most of the linear layers kept in their stored codes are in
  /// (int4, int4_asym or, for GGUF Q5 files, int5_asym, for IQ4 files
  /// int4_nl, for Q6_K files int6, for Q3_K_M files and llama.cpp's Q2_K
  /// ones, whose Q3_K matrices are the most common kept, int4_g16): the
  /// model's format;
  /// none when checkpoint_options::keep_stored_codes was off or nothing was
  /// stored that way. A GGUF file's matrices in another format troupe keeps
  /// (an IQ4_XS file's Q5_K attn_v as int5_asym, a Q4_K_M file's Q6_K ones
  /// as int6, a Q3_K_M file's Q4_K and Q5_K ones) are kept too, in theirs;
  /// layers stored otherwise hold bf16 data or expand on demand.
  weight_quantization stored_quantization() const { return stored_quantization_; }
  /// True when the linear layers were stored in codes that need 5 to 8 bits
  /// on a linear grid (mostly GGUF Q5_0 / Q5_1 / Q5_K / Q6_K / Q8_0 /
  /// IQ4_NL / IQ4_XS / Q2_K / Q3_K, or GPTQ with bits 8: ggml_code_bits).
  /// Those not kept
  /// in their codes (stored_quantization()) are held expanded (bf16 / f16)
  /// or expanded on demand.
  bool stored_5_to_8_bits() const { return stored_5_to_8_bits_; }

 private:
  checkpoint() = default;
  void open_files(const checkpoint_options& options);
  void open_gguf(const std::filesystem::path& path, const checkpoint_options& options);
  void bind_weights();
  void add_hf_int4_weights(const checkpoint_options& options);
  void keep_or_expand(host_tensor tensor, bool keep);

  std::filesystem::path directory_;
  model_config config_;
  generation_config generation_;
  std::vector<safetensors_file> files_;
  std::unique_ptr<gguf_file> gguf_;
  std::deque<host_tensor> converted_;  ///< GGUF tensors under their HF names (a deque keeps pointers stable)
  gguf_buffers converted_bytes_;
  std::map<std::string, const host_tensor*, std::less<>> tensors_;
  model_weights weights_;
  weight_quantization stored_quantization_ = weight_quantization::none;
  bool stored_5_to_8_bits_ = false;
};

/// A checkpoint opened to run in one weight format, and that format.
struct quantized_checkpoint {
  checkpoint weights;
  weight_quantization quantization = weight_quantization::none;  ///< what llama_model gets
};

/// Opens `path` for the `quantization` knob ("auto" or a quantization_name())
/// on a backend that `quantized_kernels` says has int8/int4 kernels and
/// reads stored_code_source weights (cpu and cuda). "auto": a checkpoint whose linear
/// layers are stored in 4- to 6-bit groups (GGUF Q4_0 / Q4_1 / Q4_K / Q5_* /
/// IQ4_NL / IQ4_XS / Q6_K / Q3_K, AWQ, GPTQ) runs them in that format
/// (gguf_stored_code_format), one stored mostly in 5 to 8 bits otherwise
/// (Q8_0, Q2_K GGUF, 8-bit GPTQ) as int8 (requantised per
/// row), anything else as stored (none); without such kernels everything
/// runs as stored. A named format keeps the stored codes when they are that
/// format and otherwise quantises the expanded weights to it ("none":
/// bf16). Throws std::runtime_error for an unknown name.
quantized_checkpoint open_for_quantization(const std::filesystem::path& path, std::string_view quantization,
                                           bool quantized_kernels, checkpoint_options options = {});

/// Names of the shard files listed by `index_json` (the text of a
/// model.safetensors.index.json), in first-seen order, and which shard holds
/// each tensor. Throws "model.safetensors.index.json: shard name '../x'
/// escapes the model directory" for an unsafe name.
struct shard_index {
  std::vector<std::string> shard_files;
  std::map<std::string, std::string, std::less<>> weight_map;  ///< tensor name -> shard file
};
shard_index parse_shard_index(std::string_view index_json, std::string_view source = "model.safetensors.index.json");

}  // namespace troupe
