// backend::sample on the device: per-row settings and token histories are
// packed on the host (penalties need each distinct id of prompt and output
// once, with its output count), the four sampling stages run on the compute
// stream, and the tokens come back in one copy. Verify groups (speculative
// decoding) are then decided on the host: their rows' logits are copied back
// and run through the reference (kernels/speculative.hpp), so a batch without
// groups takes exactly the device path.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_backend_impl.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_step_plan.hpp"
#include "kernels/cuda/sampling_kernels.hpp"
#include "kernels/cuda/upload_layout.hpp"
#include "kernels/speculative.hpp"

namespace troupe::cuda {

namespace {

void require(bool condition, std::size_t row, const std::string& what) {
  if (!condition) throw std::invalid_argument("sample: row " + std::to_string(row) + ": " + what);
}

void check_settings(const sampling_params& s, std::size_t row) {
  require(std::isfinite(s.temperature) && s.temperature >= 0.0f, row, "temperature must be >= 0");
  require(s.top_p > 0.0f && s.top_p <= 1.0f, row, "top_p must be in (0, 1]");
  require(s.min_p >= 0.0f && s.min_p <= 1.0f, row, "min_p must be in [0, 1]");
  require(std::isfinite(s.repetition_penalty) && s.repetition_penalty > 0.0f, row, "repetition_penalty must be > 0");
  require(std::isfinite(s.presence_penalty) && std::isfinite(s.frequency_penalty), row, "penalties must be finite");
  require(s.top_logprobs >= 0, row, "top_logprobs must be >= 0");
}

// The host side of one sampling launch: every array the kernels read.
struct sampling_batch {
  std::vector<sampling_row_params> rows;
  std::vector<logit_bias_entry> biases;
  std::vector<std::int32_t> suppressed;
  std::vector<penalty_entry> penalties;
  std::vector<std::uint32_t> masks;           ///< the constrained rows' masks, packed
  std::vector<std::int32_t> sort_offsets{0};  ///< [truncating rows + 1]
  std::int32_t max_top = 0;
};

// Appends each distinct id of the row's prompt and output with its output count.
void collect_penalties(const sampling_row& row, std::size_t index, std::int64_t vocab, penalty_marks& marks,
                       std::vector<penalty_entry>& out) {
  if (marks.stamp.size() != static_cast<std::size_t>(vocab)) {
    marks.stamp.assign(static_cast<std::size_t>(vocab), 0);
    marks.count.assign(static_cast<std::size_t>(vocab), 0);
    marks.mark = 0;
  }
  if (++marks.mark == 0) {
    std::fill(marks.stamp.begin(), marks.stamp.end(), 0u);
    marks.mark = 1;
  }
  const std::size_t first = out.size();
  const auto note = [&](std::int32_t id, bool in_output) {
    require(id >= 0 && id < vocab, index, "history token " + std::to_string(id) + " is outside the vocabulary");
    const auto i = static_cast<std::size_t>(id);
    if (marks.stamp[i] != marks.mark) {
      marks.stamp[i] = marks.mark;
      marks.count[i] = 0;
      out.push_back({id, 0});
    }
    if (in_output) ++marks.count[i];
  };
  for (std::int32_t id : row.prompt_tokens) note(id, false);
  for (std::int32_t id : row.output_tokens) note(id, true);
  for (std::size_t e = first; e < out.size(); ++e)
    out[e].output_count = marks.count[static_cast<std::size_t>(out[e].token)];
}

sampling_row_params row_settings(const sampling_params& s, std::int64_t vocab) {
  sampling_row_params rp;
  rp.temperature = s.temperature;
  rp.top_p = s.top_p;
  rp.min_p = s.min_p;
  rp.repetition_penalty = s.repetition_penalty;
  rp.presence_penalty = s.presence_penalty;
  rp.frequency_penalty = s.frequency_penalty;
  rp.top_k = s.top_k;
  rp.top_logprobs = static_cast<std::int32_t>(std::min<std::int64_t>(s.top_logprobs, vocab));
  rp.greedy = s.temperature == 0.0f || s.top_k == 1 ? 1 : 0;
  return rp;
}

sampling_batch pack_rows(const std::vector<sampling_row>& rows, std::int64_t vocab, penalty_marks& marks) {
  sampling_batch batch;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const sampling_row& row = rows[i];
    require(row.params != nullptr, i, "no sampling params");
    const sampling_params& s = *row.params;
    check_settings(s, i);
    sampling_row_params rp = row_settings(s, vocab);
    if (rp.greedy == 0 && ((s.top_k > 0 && s.top_k < vocab) || s.top_p < 1.0f || s.min_p > 0.0f)) {
      require(
          static_cast<std::int64_t>(batch.sort_offsets.size() + 1) * vocab < std::numeric_limits<std::int32_t>::max(),
          i, "too many truncating rows for one sort");
      rp.sort_row = static_cast<std::int32_t>(batch.sort_offsets.size()) - 1;
      batch.sort_offsets.push_back(static_cast<std::int32_t>((rp.sort_row + 1) * vocab));
    }
    rp.bias_begin = static_cast<std::int32_t>(batch.biases.size());
    for (const auto& [id, bias] : s.logit_bias) {
      require(id >= 0 && id < vocab, i, "logit_bias token " + std::to_string(id) + " is outside the vocabulary");
      batch.biases.push_back({id, bias});
    }
    rp.bias_end = static_cast<std::int32_t>(batch.biases.size());
    rp.suppressed_begin = static_cast<std::int32_t>(batch.suppressed.size());
    for (std::int32_t id : row.suppressed_tokens) {
      require(id >= 0 && id < vocab, i, "suppressed token " + std::to_string(id) + " is outside the vocabulary");
      batch.suppressed.push_back(id);
    }
    rp.suppressed_end = static_cast<std::int32_t>(batch.suppressed.size());
    if (!row.allowed_mask.empty()) {
      const std::size_t words = std::min(row.allowed_mask.size(), static_cast<std::size_t>((vocab + 31) / 32));
      rp.mask_begin = static_cast<std::int32_t>(batch.masks.size());
      rp.mask_words = static_cast<std::int32_t>(words);
      batch.masks.insert(batch.masks.end(), row.allowed_mask.begin(),
                         row.allowed_mask.begin() + static_cast<std::ptrdiff_t>(words));
    }
    rp.penalty_begin = static_cast<std::int32_t>(batch.penalties.size());
    if (s.repetition_penalty != 1.0f || s.presence_penalty != 0.0f || s.frequency_penalty != 0.0f)
      collect_penalties(row, i, vocab, marks, batch.penalties);
    rp.penalty_end = static_cast<std::int32_t>(batch.penalties.size());
    rp.seed = row.seed;
    rp.token_index = row.token_index;
    batch.max_top = std::max(batch.max_top, rp.top_logprobs);
    batch.rows.push_back(rp);
  }
  return batch;
}

// Device memory of one sampling launch (returned to the cache afterwards).
struct sampling_buffers {
  device_buffer metadata;  // the packed host arrays
  device_buffer work;      // [L, V] processed logits
  device_buffer stats;     // [L] row_statistics
  device_buffer sort;      // keys in, ids in, keys out, ids out: [R, V] each
  device_buffer results;   // [L] sampled tokens then [L, max_top] top entries
  device_buffer temp;      // the sort's scratch
};

}  // namespace

void cuda_backend::verify_on_host(const step_batch& batch, tensor_view logits, sample_result& result) {
  const std::int64_t vocab = logits.cols;
  const std::int64_t stride = logits.rows <= 1 ? vocab : logits.row_stride;
  result.accepted.resize(batch.verify.size());
  std::vector<float> host;
  for (std::size_t g = 0; g < batch.verify.size(); ++g) {
    const verify_group& group = batch.verify[g];
    const auto num_rows = static_cast<std::int64_t>(group.drafts.size()) + 1;
    host.resize(static_cast<std::size_t>((num_rows - 1) * stride + vocab));
    copy_to_host(host.data(), logits.as<const float>() + group.first_row * stride, host.size() * sizeof(float));
    const verify_input input{
        host.data(),
        stride,
        vocab,
        std::span(batch.sampling).subspan(static_cast<std::size_t>(group.first_row), group.drafts.size() + 1),
        group.drafts,
        group.draft_probs,
        group.parents};
    store_outcome(batch, g, verify_drafts(input), result);
  }
}

sample_result cuda_backend::sample(const step_plan& plan, tensor_view logits) {
  const cuda_step_plan& p = plan_of(plan);
  const std::vector<sampling_row>& rows = p.batch->sampling;
  if (rows.empty()) return {};
  if (logits.type != dtype::f32 || logits.rows != static_cast<std::int64_t>(rows.size()) || logits.cols <= 0)
    throw std::invalid_argument("sample: logits must be f32 with one row per sampling row (" +
                                std::to_string(rows.size()) + ")");
  const std::int64_t vocab = logits.cols;
  const sampling_batch batch = pack_rows(rows, vocab, penalty_marks_);

  upload_layout layout;
  const std::size_t row_offset = layout.add(batch.rows);
  const std::size_t bias_offset = layout.add(batch.biases);
  const std::size_t suppressed_offset = layout.add(batch.suppressed);
  const std::size_t penalty_offset = layout.add(batch.penalties);
  const std::size_t mask_offset = layout.add(batch.masks);
  const std::size_t sort_offset = layout.add(batch.sort_offsets);
  sampling_buffers buffers;
  buffers.metadata = upload_packed(layout);

  const auto num_rows = static_cast<std::size_t>(rows.size());
  const auto sort_rows = static_cast<std::int32_t>(batch.sort_offsets.size()) - 1;
  const std::size_t row_elements = static_cast<std::size_t>(vocab);
  const std::size_t sort_elements = static_cast<std::size_t>(sort_rows) * row_elements;
  const std::size_t result_count = num_rows * (1 + static_cast<std::size_t>(batch.max_top));
  buffers.work = allocate(num_rows * row_elements * sizeof(float));
  buffers.stats = allocate(num_rows * sizeof(row_statistics));
  buffers.sort = allocate(sort_elements * 4 * sizeof(float));
  buffers.results = allocate(result_count * sizeof(sampled_token));

  sampler_params params;
  params.logits = logits.as<const float>();
  params.logits_stride = logits.rows <= 1 ? vocab : logits.row_stride;
  params.work = static_cast<float*>(buffers.work.data());
  params.rows = static_cast<std::int64_t>(num_rows);
  params.vocab = vocab;
  params.row_params = at_offset<const sampling_row_params>(buffers.metadata.data(), row_offset);
  params.biases = at_offset<const logit_bias_entry>(buffers.metadata.data(), bias_offset);
  params.suppressed = at_offset<const std::int32_t>(buffers.metadata.data(), suppressed_offset);
  params.penalties = at_offset<const penalty_entry>(buffers.metadata.data(), penalty_offset);
  params.masks = at_offset<const std::uint32_t>(buffers.metadata.data(), mask_offset);
  params.stats = static_cast<row_statistics*>(buffers.stats.data());
  params.sort_keys_in = static_cast<float*>(buffers.sort.data());
  params.sort_ids_in = reinterpret_cast<std::int32_t*>(params.sort_keys_in + sort_elements);
  params.sort_keys = params.sort_keys_in + 2 * sort_elements;
  params.sort_ids = reinterpret_cast<std::int32_t*>(params.sort_keys_in + 3 * sort_elements);
  params.sort_offsets = at_offset<const std::int32_t>(buffers.metadata.data(), sort_offset);
  params.sort_rows = sort_rows;
  params.results = static_cast<sampled_token*>(buffers.results.data());
  params.top = params.results + num_rows;
  params.max_top = batch.max_top;

  launch_sampling_prepare(params, compute_.get());
  const std::size_t temp_bytes = sampling_sort_temp_bytes(params);
  buffers.temp = allocate(temp_bytes);
  launch_sampling_sort(params, buffers.temp.data(), temp_bytes, compute_.get());
  launch_sampling_select(params, compute_.get());
  launch_sampling_top(params, compute_.get());

  const std::size_t readback_bytes = result_count * sizeof(sampled_token);
  if (readback_.bytes() < readback_bytes) readback_ = pinned_allocation(std::max<std::size_t>(readback_bytes, 4096));
  copy_to_host(readback_.data(), buffers.results.data(), readback_bytes);
  const auto* host_results = static_cast<const sampled_token*>(readback_.data());
  const sampled_token* host_top = host_results + num_rows;
  sample_result result;
  std::vector<sample_output>& outputs = result.rows;
  outputs.resize(num_rows);
  for (std::size_t i = 0; i < num_rows; ++i) {
    const sampling_params& s = *rows[i].params;
    outputs[i].token = host_results[i].token;
    if (s.logprobs || s.top_logprobs > 0) outputs[i].logprob = host_results[i].logprob;
    for (std::int32_t n = 0; n < batch.rows[i].top_logprobs; ++n) {
      const sampled_token& entry = host_top[i * static_cast<std::size_t>(batch.max_top) + static_cast<std::size_t>(n)];
      outputs[i].top.push_back({entry.token, entry.logprob});
    }
  }
  if (!p.batch->verify.empty()) verify_on_host(*p.batch, logits, result);
  return result;
}

}  // namespace troupe::cuda
