// Verify groups on the CUDA backend: ordinary rows keep the device draw bit
// for bit, and each group's rows are the host reference's verification of
// the group's logits (kernels/speculative.hpp), whatever the row stride.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include "kernels/speculative.hpp"
#include "tests/gpu/gpu_test_support.hpp"
#include "tests/kernels/verify_step_support.hpp"

namespace troupe::gpu_test {
namespace {

using Verify = cuda_fixture;
using test::group_rows;
using test::step_part;

void expect_same(const sample_output& got, const sample_output& want) {
  EXPECT_EQ(got.token, want.token);
  EXPECT_EQ(got.logprob, want.logprob);
  ASSERT_EQ(got.top.size(), want.top.size());
  for (std::size_t i = 0; i < got.top.size(); ++i) EXPECT_EQ(got.top[i].token, want.top[i].token);
}

TEST_F(Verify, GroupsAreTheHostReferenceAndOrdinaryRowsStayOnTheDevice) {
  auto rng = fresh_rng();
  const std::int64_t vocab = quick_mode() ? 512 : 32000;
  sampling_params p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.logprobs = true;
  p.top_logprobs = 3;
  sampling_params greedy;
  greedy.temperature = 0.0f;
  std::vector<float> host = random_floats(rng, static_cast<std::size_t>(9 * vocab), 2.0f);
  host[static_cast<std::size_t>(1 * vocab + 3)] = 30.0f;  // each group accepts its first draft
  host[static_cast<std::size_t>(5 * vocab + 0)] = 30.0f;
  const auto row = [&](std::size_t r) {
    return std::vector<float>(host.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                              host.begin() + static_cast<std::ptrdiff_t>((r + 1) * vocab));
  };
  const std::vector<std::int32_t> sampled_drafts = {3, 17, 3}, greedy_drafts = {0, 1};
  const group_rows sampled(p, 11, 4, {3}, sampled_drafts);
  const group_rows argmax(greedy, 12, 0, {}, greedy_drafts);
  const sampling_row ordinary{&p, 13, 2, {}, {}, {}};
  const std::vector<step_part> parts = {step_part{{row(0)}, {ordinary}, {}, {}, false},
                                        step_part{{row(1), row(2), row(3), row(4)}, sampled.rows, sampled_drafts, {}},
                                        step_part{{row(5), row(6), row(7)}, argmax.rows, greedy_drafts, {}},
                                        step_part{{row(8)}, {ordinary}, {}, {}, false}};
  step_batch batch = test::make_verify_batch(parts);
  kv_cache_spec spec = test::verify_cache_spec(parts.size());
  spec.head_dim = 64;
  spec.type = dtype::bf16;  // what the CUDA backend caches
  const attention_geometry geometry{1, 1, 64, 0.125f, {}};
  const auto plan = gpu().plan_step(batch, spec, geometry);
  const device_matrix logits = upload_matrix(gpu(), {.type = dtype::f32, .rows = 9, .cols = vocab, .stride = vocab + 32}, host.data());
  const sample_result with_groups = gpu().sample(*plan, logits.view);

  step_batch plain = batch;
  plain.verify.clear();
  const auto plain_plan = gpu().plan_step(plain, spec, geometry);
  const sample_result device_only = gpu().sample(*plain_plan, logits.view);
  expect_same(with_groups.rows[0], device_only.rows[0]);
  expect_same(with_groups.rows[8], device_only.rows[8]);

  ASSERT_EQ(with_groups.accepted.size(), 2u);
  for (std::size_t g = 0; g < 2; ++g) {
    const verify_group& group = batch.verify[g];
    const auto first = static_cast<std::size_t>(group.first_row);
    const verify_outcome want = verify_drafts({host.data() + first * static_cast<std::size_t>(vocab), vocab, vocab,
                                               std::span(batch.sampling).subspan(first, group.drafts.size() + 1),
                                               group.drafts, group.draft_probs});
    EXPECT_EQ(with_groups.accepted[g], want.accepted);
    EXPECT_GE(want.accepted, 1);
    for (std::size_t r = 0; r <= group.drafts.size(); ++r) {
      if (r < want.emitted.size()) {
        expect_same(with_groups.rows[first + r], want.emitted[r]);
      } else {
        EXPECT_EQ(with_groups.rows[first + r].token, -1);
      }
    }
  }
}

}  // namespace
}  // namespace troupe::gpu_test

#endif
