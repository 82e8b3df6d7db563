#include "model/llama_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include "kernels/stored_code_source.hpp"
#include "model/stacked_linear.hpp"

namespace troupe {

struct llama_model::layer {
  stacked_linear qkv;                            // [(Hq + 2 Hkv) * D, hidden]
  stacked_linear o;                              // [hidden, Hq * D]
  stacked_linear gate_up;                        // [2 F, hidden]
  stacked_linear down;                           // [hidden, F]
  device_tensor input_norm;                      // [hidden]
  device_tensor post_attention_norm;             // [hidden]
  device_tensor q_norm;                          // [D] (Qwen3 only)
  device_tensor k_norm;                          // [D] (Qwen3 only)
  std::array<weight_quantization, 7> formats{};  // of q, k, v, o, gate, up, down
};

// What upload_weights produced; drafters built over the same model share it.
struct llama_model::uploaded {
  device_tensor embed_tokens;
  device_tensor final_norm;
  std::unique_ptr<linear_weight> lm_head;
  std::vector<layer> layers;
};

// Activation buffers sized for the largest step seen so far.
struct llama_model::workspace {
  std::int64_t token_capacity = 0;
  std::int64_t logits_capacity = 0;
  device_buffer residual;  // [T, hidden] the residual stream
  device_buffer normed;    // [T, hidden] input of the next projection
  device_buffer qkv;       // [T, (Hq + 2 Hkv) * D]
  device_buffer attn;      // [T, Hq * D]
  device_buffer proj;      // [T, hidden] output of o_proj / down_proj
  device_buffer gate_up;   // [T, 2 F]
  device_buffer act;       // [T, F]
  device_buffer rows;      // [L, hidden] final hidden states of logits rows
  device_buffer logits;    // [L, vocab] f32
};

namespace {

// Logits per row a tied 4-bit head rescores exactly: the exact winner has to
// be among them, and the int4 head's error is small next to the spread of
// the top 64 logits (measured: tests/model/demo_quantized_test.cpp).
constexpr std::int64_t refined_head_candidates = 64;

std::vector<host_tensor> present(std::initializer_list<const host_tensor*> tensors) {
  std::vector<host_tensor> out;
  for (const host_tensor* t : tensors) {
    if (t != nullptr) out.push_back(*t);
  }
  return out;
}

// True when some layer matrix is kept in its checkpoint's 4-bit codes
// (kernels/stored_code_source.hpp) rather than expanded at load.
bool keeps_4_bit_layers(const model_weights& weights) {
  for (const layer_weights& w : weights.layers) {
    for (const host_tensor* t : {w.q_proj, w.k_proj, w.v_proj, w.o_proj, w.gate_proj, w.up_proj, w.down_proj})
      if (t != nullptr && t->stored_codes != nullptr) return true;
  }
  return false;
}

// The format of one projection. One kept in its checkpoint's codes runs
// in their format (most in the model's; an IQ4_XS file's Q5_K attn_v as
// int5_asym, a Q4_K_M file's Q6_K attn_v and ffn_down as int6, a Q2_K
// file's Q3_K attn_output and ffn_down as int4_g16, and its attn_v, Q3_K
// or Q4_K by the model's grouping, as int4_g16 or int4_asym). A
// checkpoint that keeps 4- to 6-bit layers and stores others in codes
// troupe does not keep (Q8_0, Q2_K), expanded at load, keeps what
// those codes hold: such a projection runs as int8 instead of being
// rounded to 4 to 6 bits a second time, on a grid that is not theirs. Every other projection takes the
// model's format, so a stack holding several kinds is split
// (model/stacked_linear.hpp).
// (A model asked to run unquantised or in int8 gets its kept parts in
// that format, which the backend refuses by name: open_for_quantization
// never pairs them.)
weight_quantization projection_format(const host_tensor& part, weight_quantization model_format, bool keeps_4_bits) {
  const int bits = quantization_code_bits(model_format);
  const bool few_bits = bits > 0 && bits < 8;
  if (few_bits && part.stored_codes != nullptr) return part.stored_codes->format();
  return few_bits && keeps_4_bits && part.stored_bits > 0 ? weight_quantization::int8 : model_format;
}

std::int64_t grown(std::int64_t needed, std::int64_t current) {
  std::int64_t capacity = current > 0 ? current : 16;
  while (capacity < needed) capacity *= 2;
  return capacity;
}

}  // namespace

bool lm_head_rescored_by_default(const model_config& config, const backend& device) {
  return config.tie_word_embeddings && device.logit_refinement_pays();
}

llama_model::llama_model(const model_config& config, const model_weights& weights, backend& backend,
                         weight_quantization quantization, std::optional<weight_quantization> lm_head,
                         std::int64_t head_rows)
    : config_(config), backend_(backend), workspace_(std::make_unique<workspace>()) {
  geometry_.num_q_heads = static_cast<int>(config.num_attention_heads);
  geometry_.num_kv_heads = static_cast<int>(config.num_key_value_heads);
  geometry_.head_dim = static_cast<int>(config.head_dim);
  geometry_.scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
  geometry_.rope = config.rope;
  const weight_quantization head =
      lm_head.value_or(*lm_head_quantization(quantization, "auto", lm_head_rescored_by_default(config, backend)));
  const int head_bits = quantization_code_bits(head);
  refine_head_ = config.tie_word_embeddings && backend.supports_logit_refinement() && head_bits > 0 && head_bits < 8;
  if (head_rows < 0 || head_rows > config.vocab_size)
    throw std::invalid_argument("an LM head of " + std::to_string(head_rows) + " rows: the vocabulary has " +
                                std::to_string(config.vocab_size) + " ids");
  logits_width_ = head_rows > 0 ? head_rows : config.vocab_size;
  upload_weights(weights, quantization, head);
  active_layers_.resize(weights_->layers.size());
  for (std::size_t i = 0; i < active_layers_.size(); ++i) active_layers_[i] = static_cast<int>(i);
}

llama_model::llama_model(const llama_model& source, backend& backend, std::vector<int> layers)
    : config_(source.config_),
      backend_(backend),
      geometry_(source.geometry_),
      weights_(source.weights_),
      active_layers_(std::move(layers)),
      logits_width_(source.logits_width_),
      refine_head_(source.refine_head_),
      workspace_(std::make_unique<workspace>()) {
  if (backend.name() != source.backend_.name())
    throw std::invalid_argument("a layer-skipping drafter runs on a " + source.backend_.name() + " backend, not " +
                                backend.name());
  if (active_layers_.empty()) throw std::invalid_argument("a layer-skipping drafter needs at least one layer");
  for (std::size_t i = 0; i < active_layers_.size(); ++i) {
    const int index = active_layers_[i];
    if (index < 0 || index >= static_cast<int>(weights_->layers.size()) || (i > 0 && index <= active_layers_[i - 1]))
      throw std::invalid_argument("drafter layers must be ascending indices below " +
                                  std::to_string(weights_->layers.size()));
  }
}

llama_model::~llama_model() = default;

std::string describe_linear_formats(const llama_model& model, weight_quantization quantization) {
  std::map<weight_quantization, int> others;
  int all = 0;
  for (int layer = 0; layer < static_cast<int>(model.config().num_hidden_layers); ++layer) {
    for (const weight_quantization format : model.projection_formats(layer)) {
      ++all;
      if (format != quantization) ++others[format];
    }
  }
  std::string out(quantization_name(quantization));
  for (const auto& [format, count] : others)
    out += " (" + std::to_string(count) + " of " + std::to_string(all) + " projections " +
           std::string(quantization_name(format)) + ")";
  return out;
}

std::array<weight_quantization, 7> llama_model::projection_formats(int layer) const {
  return weights_->layers.at(static_cast<std::size_t>(layer)).formats;
}

std::size_t llama_model::linear_weight_bytes() const {
  std::size_t bytes = weights_->lm_head->weight_bytes();
  for (const int index : active_layers_) {
    const layer& l = weights_->layers.at(static_cast<std::size_t>(index));
    for (const stacked_linear* stack : {&l.qkv, &l.o, &l.gate_up, &l.down}) {
      for (const stacked_linear::piece& piece : stack->pieces) bytes += piece.weight->weight_bytes();
    }
  }
  return bytes;
}

void llama_model::upload_weights(const model_weights& weights, weight_quantization quantization,
                                 weight_quantization lm_head_format) {
  auto up = std::make_shared<uploaded>();
  up->embed_tokens = backend_.upload(*weights.embed_tokens);
  up->final_norm = backend_.upload(*weights.final_norm);
  host_tensor lm_head = *weights.lm_head;
  if (logits_width_ < lm_head.matrix_rows()) {
    // The first rows of a row-major [vocab, hidden] matrix are a prefix of its bytes.
    if (lm_head.stored_codes || lm_head.data == nullptr || lm_head.shape.size() != 2)
      throw std::runtime_error(lm_head.name +
                               ": the LM head is stored in 4 bits; a head of fewer rows than the "
                               "vocabulary needs it unquantised in the checkpoint");
    lm_head.shape[0] = logits_width_;
  }
  // A tied head gets its own quantised copy; the embedding gather keeps the table.
  up->lm_head = backend_.prepare_quantized_linear({&lm_head, 1}, {}, lm_head_format);
  up->layers.resize(weights.layers.size());
  const bool keeps_4_bits = keeps_4_bit_layers(weights);
  for (std::size_t i = 0; i < weights.layers.size(); ++i) {
    const layer_weights& w = weights.layers[i];
    layer& l = up->layers[i];
    // The layer's projections from number `first` on (in the order q, k, v,
    // o, gate, up, down), each in its projection_format.
    const auto prepare = [&](std::size_t first, std::initializer_list<const host_tensor*> projections,
                             std::initializer_list<const host_tensor*> biases) {
      std::vector<host_tensor> parts;
      std::vector<weight_quantization> formats;
      for (const host_tensor* projection : projections) {
        if (projection == nullptr)
          throw std::invalid_argument("decoder layer " + std::to_string(i) + " lacks a projection");
        parts.push_back(*projection);
        formats.push_back(projection_format(*projection, quantization, keeps_4_bits));
        l.formats.at(first + parts.size() - 1) = formats.back();
      }
      return prepare_stacked_linear(backend_, parts, present(biases), formats);
    };
    l.qkv = prepare(0, {w.q_proj, w.k_proj, w.v_proj}, {w.q_bias, w.k_bias, w.v_bias});
    l.o = prepare(3, {w.o_proj}, {w.o_bias});
    l.gate_up = prepare(4, {w.gate_proj, w.up_proj}, {});
    l.down = prepare(6, {w.down_proj}, {});
    l.input_norm = backend_.upload(*w.input_norm);
    l.post_attention_norm = backend_.upload(*w.post_attention_norm);
    if (w.q_norm != nullptr) l.q_norm = backend_.upload(*w.q_norm);
    if (w.k_norm != nullptr) l.k_norm = backend_.upload(*w.k_norm);
  }
  weights_ = std::move(up);
}

kv_cache_spec llama_model::kv_spec(int block_size, std::int64_t num_blocks, dtype type) const {
  kv_cache_spec spec;
  spec.num_layers = num_layers();
  spec.num_kv_heads = static_cast<int>(config_.num_key_value_heads);
  spec.head_dim = static_cast<int>(config_.head_dim);
  spec.block_size = block_size;
  spec.num_blocks = num_blocks;
  spec.type = type;
  return spec;
}

std::size_t llama_model::kv_block_bytes(int block_size, dtype type) const {
  return kv_spec(block_size, 1, type).block_bytes();
}

std::size_t llama_model::workspace_bytes_per_token() const {
  const auto hidden = static_cast<std::size_t>(config_.hidden_size);
  const auto q_width = static_cast<std::size_t>(config_.num_attention_heads) * config_.head_dim;
  const auto qkv_width = q_width + 2 * static_cast<std::size_t>(config_.num_key_value_heads) * config_.head_dim;
  const auto ffn = static_cast<std::size_t>(config_.intermediate_size);
  // residual, normed, proj; qkv; attn; gate_up; act
  return (3 * hidden + qkv_width + q_width + 3 * ffn) * dtype_size(backend_.activation_type());
}

std::size_t llama_model::workspace_bytes_per_row() const {
  return static_cast<std::size_t>(config_.hidden_size) * dtype_size(backend_.activation_type()) +
         static_cast<std::size_t>(logits_width_) * sizeof(float);
}

// Grows to the next power of two (fewer regrowths) unless that would pass
// the limit, then to what the step needs. A part being regrown has its
// capacity at 0 until all its buffers exist, so an allocation that throws
// leaves a workspace that the next step regrows rather than overruns.
void llama_model::ensure_workspace(std::int64_t tokens, std::int64_t logits_rows) {
  workspace& ws = *workspace_;
  if (tokens <= ws.token_capacity && logits_rows <= ws.logits_capacity) return;
  const std::size_t per_token = workspace_bytes_per_token();
  const std::size_t per_row = workspace_bytes_per_row();
  const auto bytes = [&](std::int64_t t, std::int64_t l) {
    return static_cast<std::size_t>(t) * per_token + static_cast<std::size_t>(l) * per_row;
  };
  std::int64_t token_capacity = tokens > ws.token_capacity ? grown(tokens, ws.token_capacity) : ws.token_capacity;
  std::int64_t logits_capacity =
      logits_rows > ws.logits_capacity ? grown(logits_rows, ws.logits_capacity) : ws.logits_capacity;
  if (workspace_limit_ > 0 && bytes(token_capacity, logits_capacity) > workspace_limit_) {
    token_capacity = tokens;
    logits_capacity = logits_rows;
    if (bytes(tokens, logits_rows) > workspace_limit_)
      throw std::length_error("a step of " + std::to_string(tokens) + " tokens and " + std::to_string(logits_rows) +
                              " logits rows needs a workspace of " + std::to_string(bytes(tokens, logits_rows)) +
                              " bytes, more than the limit of " + std::to_string(workspace_limit_) +
                              " (max_step_workspace_bytes)");
  }
  const std::size_t act = dtype_size(backend_.activation_type());
  const auto hidden = static_cast<std::size_t>(config_.hidden_size);
  const auto q_width = static_cast<std::size_t>(config_.num_attention_heads) * config_.head_dim;
  const auto qkv_width = q_width + 2 * static_cast<std::size_t>(config_.num_key_value_heads) * config_.head_dim;
  const auto ffn = static_cast<std::size_t>(config_.intermediate_size);
  if (token_capacity != ws.token_capacity) {
    ws.token_capacity = 0;
    for (device_buffer* buffer : {&ws.residual, &ws.normed, &ws.qkv, &ws.attn, &ws.proj, &ws.gate_up, &ws.act})
      *buffer = {};  // freed before the new ones are allocated: the peak is the new size
    const auto t = static_cast<std::size_t>(token_capacity);
    ws.residual = backend_.allocate(t * hidden * act);
    ws.normed = backend_.allocate(t * hidden * act);
    ws.qkv = backend_.allocate(t * qkv_width * act);
    ws.attn = backend_.allocate(t * q_width * act);
    ws.proj = backend_.allocate(t * hidden * act);
    ws.gate_up = backend_.allocate(t * 2 * ffn * act);
    ws.act = backend_.allocate(t * ffn * act);
    ws.token_capacity = token_capacity;
  }
  if (logits_capacity != ws.logits_capacity) {
    ws.logits_capacity = 0;
    ws.rows = {};
    ws.logits = {};
    const auto l = static_cast<std::size_t>(logits_capacity);
    ws.rows = backend_.allocate(l * hidden * act);
    ws.logits = backend_.allocate(l * static_cast<std::size_t>(logits_width_) * sizeof(float));
    ws.logits_capacity = logits_capacity;
  }
}

void llama_model::run_layer(const layer& w, int index, const step_plan& plan, kv_cache& cache, std::int64_t tokens,
                            bool first) {
  workspace& ws = *workspace_;
  const dtype act = backend_.activation_type();
  const std::int64_t hidden = config_.hidden_size;
  const std::int64_t head_dim = config_.head_dim;
  const std::int64_t q_width = config_.num_attention_heads * head_dim;
  const std::int64_t kv_width = config_.num_key_value_heads * head_dim;
  const auto eps = static_cast<float>(config_.rms_norm_eps);

  const tensor_view residual = ws.residual.view(act, tokens, hidden);
  const tensor_view normed = ws.normed.view(act, tokens, hidden);
  const tensor_view proj = ws.proj.view(act, tokens, hidden);
  // The previous layer's MLP output joins the residual stream here, fused
  // with this layer's input norm.
  if (first) {
    backend_.rms_norm(residual, w.input_norm.view, eps, normed);
  } else {
    backend_.add_rms_norm(residual, proj, w.input_norm.view, eps, normed);
  }

  const tensor_view qkv = ws.qkv.view(act, tokens, q_width + 2 * kv_width);
  run_stacked_linear(backend_, normed, w.qkv, qkv);
  const tensor_view q = qkv.col_slice(0, q_width);
  const tensor_view k = qkv.col_slice(q_width, kv_width);
  const tensor_view v = qkv.col_slice(q_width + kv_width, kv_width);
  if (w.q_norm.view.data != nullptr) {
    backend_.head_rms_norm(q, static_cast<int>(head_dim), w.q_norm.view, eps);
    backend_.head_rms_norm(k, static_cast<int>(head_dim), w.k_norm.view, eps);
  }
  backend_.rope_and_write_kv(plan, q, k, v, cache, index);
  const tensor_view attn = ws.attn.view(act, tokens, q_width);
  backend_.attention(plan, q, cache, index, attn);
  run_stacked_linear(backend_, attn, w.o, proj);

  backend_.add_rms_norm(residual, proj, w.post_attention_norm.view, eps, normed);
  const tensor_view gate_up = ws.gate_up.view(act, tokens, 2 * config_.intermediate_size);
  run_stacked_linear(backend_, normed, w.gate_up, gate_up);
  const tensor_view activated = ws.act.view(act, tokens, config_.intermediate_size);
  backend_.silu_mul(gate_up, activated);
  run_stacked_linear(backend_, activated, w.down, proj);
}

tensor_view llama_model::forward(const step_batch& batch, kv_cache& cache, host_block_pool* host) {
  const std::int64_t tokens = batch.num_tokens();
  const std::int64_t rows = batch.num_logits_rows();
  if (tokens == 0) throw std::invalid_argument("step batch has no tokens");
  for (std::int32_t id : batch.token_ids) {
    if (id < 0 || id >= config_.vocab_size)
      throw std::invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary");
  }
  plan_.reset();
  plan_ = backend_.plan_step(batch, cache.spec(), geometry_);
  if (!batch.block_copies.empty()) backend_.copy_blocks(cache, host, batch.block_copies);
  ensure_workspace(tokens, rows);

  workspace& ws = *workspace_;
  const dtype act = backend_.activation_type();
  const std::int64_t hidden = config_.hidden_size;
  backend_.embed(*plan_, weights_->embed_tokens.view, ws.residual.view(act, tokens, hidden));
  // A drafter's own cache holds only the layers it runs: cache layer i is
  // active_layers_[i] (on the target's cache a drafter's layers are its first, so i is i).
  for (std::size_t i = 0; i < active_layers_.size(); ++i) {
    run_layer(weights_->layers[static_cast<std::size_t>(active_layers_[i])], static_cast<int>(i), *plan_, cache, tokens,
              i == 0);
  }
  const tensor_view logits = ws.logits.view(dtype::f32, rows, logits_width_);
  if (rows == 0) return logits;
  const tensor_view normed = ws.normed.view(act, tokens, hidden);
  backend_.add_rms_norm(ws.residual.view(act, tokens, hidden), ws.proj.view(act, tokens, hidden),
                        weights_->final_norm.view, config_.rms_norm_eps, normed);
  const tensor_view last_rows = ws.rows.view(act, rows, hidden);
  backend_.gather_logits_rows(*plan_, normed, last_rows);
  backend_.linear(last_rows, *weights_->lm_head, logits);
  if (refine_head_) {
    tensor_view head_rows_of_table = weights_->embed_tokens.view;
    head_rows_of_table.rows = logits_width_;
    backend_.refine_logits(last_rows, head_rows_of_table,
                           static_cast<int>(std::min<std::int64_t>(refined_head_candidates, logits_width_)), logits);
  }
  return logits;
}

sample_result llama_model::step(const step_batch& batch, kv_cache& cache, host_block_pool* host) {
  // Sampling rules name any id of the vocabulary (penalties, logit bias).
  if (logits_width_ != config_.vocab_size)
    throw std::logic_error("a model whose LM head covers " + std::to_string(logits_width_) + " of " +
                           std::to_string(config_.vocab_size) + " ids gives logits, not samples");
  const tensor_view logits = forward(batch, cache, host);
  if (batch.num_logits_rows() == 0) return {};
  return backend_.sample(*plan_, logits);
}

std::vector<float> llama_model::logits(const step_batch& batch, kv_cache& cache, host_block_pool* host) {
  const tensor_view logits = forward(batch, cache, host);
  std::vector<float> out(logits.element_count());
  if (!out.empty()) backend_.copy_to_host(out.data(), logits.data, out.size() * sizeof(float));
  return out;
}

}  // namespace troupe
