#pragma once
// A step whose logits rows are given, for the sampling tests: every row
// comes from token row 0 of a one-token batch, planned on a CPU backend.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/step_batch.hpp"

namespace troupe::test {

/// One step whose L logits rows all come from token row 0.
struct sampling_step {
  step_batch batch;
  std::unique_ptr<step_plan> plan;
  device_buffer logits;
  tensor_view view;

  sampling_step(backend& b, const std::vector<std::vector<float>>& rows, std::vector<sampling_row> sampling) {
    batch = one_token_step(1);
    batch.logits_indices.assign(rows.size(), 0);
    batch.sampling = std::move(sampling);
    const kv_cache_spec spec{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .block_size = 4, .num_blocks = 1};
    plan = b.plan_step(batch, spec, {1, 1, 2, 1.0f, {.head_dim = 2}});
    const auto vocab = static_cast<std::int64_t>(rows.front().size());
    logits = b.allocate(rows.size() * static_cast<std::size_t>(vocab) * sizeof(float));
    view = logits.view(dtype::f32, static_cast<std::int64_t>(rows.size()), vocab);
    for (std::size_t r = 0; r < rows.size(); ++r)
      std::copy(rows[r].begin(), rows[r].end(), view.as<float>() + r * vocab);
  }
};

}  // namespace troupe::test
