// The CPU backend's sample(): one pool task per ordinary row (sampler.cpp)
// and one per verify group (kernels/speculative.cpp, its rows in order).

#include "kernels/cpu/cpu_backend_impl.hpp"
#include "kernels/cpu/cpu_plan.hpp"
#include "kernels/cpu/sampler.hpp"
#include "kernels/speculative.hpp"

namespace troupe::cpu {

sample_result cpu_backend::sample(const step_plan& plan_base, tensor_view logits) {
  const auto* plan = dynamic_cast<const cpu_step_plan*>(&plan_base);
  require(plan != nullptr, "sample", "the plan was not made by the cpu backend");
  const step_batch& batch = *plan->batch;
  require(logits.type == dtype::f32, "sample", "logits must be f32");
  require(logits.rows == batch.num_logits_rows(), "sample", "logits must have one row per logits index");
  require(batch.sampling.size() == static_cast<std::size_t>(logits.rows), "sample",
          "the step has no sampling settings for its logits rows");
  const auto row_logits = [&](std::int64_t r) { return logits.as<const float>() + r * logits.row_stride; };
  const std::vector<std::int32_t> ordinary = rows_outside_groups(batch);
  const auto num_ordinary = static_cast<std::int64_t>(ordinary.size());
  sample_result result;
  result.rows.resize(static_cast<std::size_t>(logits.rows));
  result.accepted.resize(batch.verify.size());
  pool_.parallel_for(num_ordinary + static_cast<std::int64_t>(batch.verify.size()), [&](std::int64_t task, int thread) {
    sampler_scratch& scratch = *sampler_scratch_[static_cast<std::size_t>(thread)];
    if (task < num_ordinary) {
      const std::int32_t r = ordinary[static_cast<std::size_t>(task)];
      result.rows[static_cast<std::size_t>(r)] =
          sample_row(kernels_, row_logits(r), logits.cols, batch.sampling[static_cast<std::size_t>(r)], scratch);
      return;
    }
    const auto g = static_cast<std::size_t>(task - num_ordinary);
    const verify_group& group = batch.verify[g];
    const verify_input input{
        row_logits(group.first_row),
        logits.row_stride,
        logits.cols,
        std::span(batch.sampling).subspan(static_cast<std::size_t>(group.first_row), group.drafts.size() + 1),
        group.drafts,
        group.draft_probs,
        group.parents};
    store_outcome(batch, g, verify_drafts(input, kernels_, scratch), result);
  });
  return result;
}

}  // namespace troupe::cpu
