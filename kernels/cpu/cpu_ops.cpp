// Row-parallel ops of the CPU backend: embedding gather, RMSNorm variants,
// SiLU-mul, the logits-row gather and the tied head's logit refinement.

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend_impl.hpp"
#include "kernels/cpu/cpu_plan.hpp"
#include "kernels/cpu/logit_refinement.hpp"

namespace troupe::cpu {

namespace {

template <class Body>
void for_each_row(thread_pool& pool, std::int64_t rows, std::int64_t cols, Body&& body) {
  const std::int64_t per_task = rows_per_task(rows, cols, pool.size());
  pool.parallel_for((rows + per_task - 1) / per_task, [&](std::int64_t task, int) {
    const std::int64_t end = std::min(rows, (task + 1) * per_task);
    for (std::int64_t r = task * per_task; r < end; ++r) body(r);
  });
}

const cpu_step_plan& as_cpu_plan(const step_plan& plan, const char* op) {
  const auto* cpu_plan = dynamic_cast<const cpu_step_plan*>(&plan);
  require(cpu_plan != nullptr, op, "the plan was not made by the cpu backend");
  return *cpu_plan;
}

void check_f32_matrix(tensor_view view, const char* op, const char* what) {
  require(view.type == dtype::f32, op, what);
  require(view.data != nullptr || view.element_count() == 0, op, "a tensor has no data");
}

void check_norm_weight(tensor_view weight, std::int64_t cols, const char* op) {
  require(weight.type == dtype::f32, op, "the norm weight must be f32 (as upload() makes it)");
  require(static_cast<std::int64_t>(weight.element_count()) == cols && weight.rows == 1, op,
          "the norm weight length differs from the row length");
}

const float* row_of(tensor_view view, std::int64_t r) { return view.as<const float>() + r * view.row_stride; }
float* mutable_row_of(tensor_view view, std::int64_t r) { return view.as<float>() + r * view.row_stride; }

}  // namespace

void cpu_backend::embed(const step_plan& plan, tensor_view table, tensor_view out) {
  const step_batch& batch = *as_cpu_plan(plan, "embed").batch;
  check_f32_matrix(out, "embed", "out must be f32");
  require(out.rows == batch.num_tokens() && out.cols == table.cols, "embed", "out must be [tokens, hidden]");
  for (std::int64_t t = 0; t < batch.num_tokens(); ++t) {
    const std::int32_t id = batch.token_ids[static_cast<std::size_t>(t)];
    if (id < 0 || id >= table.rows)
      throw std::invalid_argument("embed: token id " + std::to_string(id) + " at step row " + std::to_string(t) +
                                  " is outside the table of " + std::to_string(table.rows) + " rows");
  }
  const std::size_t element_bytes = dtype_size(table.type);
  for_each_row(pool_, out.rows, out.cols, [&](std::int64_t t) {
    const std::int32_t id = batch.token_ids[static_cast<std::size_t>(t)];
    const char* src =
        static_cast<const char*>(table.data) + static_cast<std::size_t>(id * table.row_stride) * element_bytes;
    kernels_.to_f32(src, static_cast<elem>(table.type), mutable_row_of(out, t), table.cols);
  });
}

void cpu_backend::rms_norm(tensor_view x, tensor_view weight, float eps, tensor_view out) {
  check_f32_matrix(x, "rms_norm", "x must be f32");
  check_f32_matrix(out, "rms_norm", "out must be f32");
  require(x.rows == out.rows && x.cols == out.cols, "rms_norm", "x and out differ in shape");
  check_norm_weight(weight, x.cols, "rms_norm");
  for_each_row(pool_, x.rows, x.cols, [&](std::int64_t r) {
    kernels_.rms_norm_row(row_of(x, r), weight.as<const float>(), eps, x.cols, mutable_row_of(out, r));
  });
}

void cpu_backend::add_rms_norm(tensor_view residual, tensor_view x, tensor_view weight, float eps, tensor_view out) {
  check_f32_matrix(residual, "add_rms_norm", "residual must be f32");
  check_f32_matrix(x, "add_rms_norm", "x must be f32");
  check_f32_matrix(out, "add_rms_norm", "out must be f32");
  require(x.rows == residual.rows && x.cols == residual.cols && out.rows == x.rows && out.cols == x.cols,
          "add_rms_norm", "residual, x and out differ in shape");
  check_norm_weight(weight, x.cols, "add_rms_norm");
  for_each_row(pool_, x.rows, x.cols, [&](std::int64_t r) {
    kernels_.add_rms_norm_row(mutable_row_of(residual, r), row_of(x, r), weight.as<const float>(), eps, x.cols,
                              mutable_row_of(out, r));
  });
}

void cpu_backend::head_rms_norm(tensor_view x, int head_dim, tensor_view weight, float eps) {
  check_f32_matrix(x, "head_rms_norm", "x must be f32");
  require(head_dim > 0 && x.cols % head_dim == 0, "head_rms_norm", "row length is not a multiple of head_dim");
  check_norm_weight(weight, head_dim, "head_rms_norm");
  const std::int64_t heads = x.cols / head_dim;
  for_each_row(pool_, x.rows, x.cols, [&](std::int64_t r) {
    float* row = mutable_row_of(x, r);
    for (std::int64_t h = 0; h < heads; ++h)
      kernels_.rms_norm_row(row + h * head_dim, weight.as<const float>(), eps, head_dim, row + h * head_dim);
  });
}

void cpu_backend::silu_mul(tensor_view gate_up, tensor_view out) {
  check_f32_matrix(gate_up, "silu_mul", "gate_up must be f32");
  check_f32_matrix(out, "silu_mul", "out must be f32");
  require(gate_up.rows == out.rows && gate_up.cols == 2 * out.cols, "silu_mul", "gate_up must be [T, 2F], out [T, F]");
  for_each_row(pool_, out.rows, out.cols, [&](std::int64_t r) {
    const float* gate = row_of(gate_up, r);
    kernels_.silu_mul_row(gate, gate + out.cols, out.cols, mutable_row_of(out, r));
  });
}

void cpu_backend::gather_logits_rows(const step_plan& plan, tensor_view x, tensor_view out) {
  const step_batch& batch = *as_cpu_plan(plan, "gather_logits_rows").batch;
  check_f32_matrix(x, "gather_logits_rows", "x must be f32");
  check_f32_matrix(out, "gather_logits_rows", "out must be f32");
  require(x.rows == batch.num_tokens(), "gather_logits_rows", "x must have one row per step token");
  require(out.rows == batch.num_logits_rows() && out.cols == x.cols, "gather_logits_rows", "out must be [L, H]");
  for (std::int64_t l = 0; l < out.rows; ++l) {
    const std::int32_t row = batch.logits_indices[static_cast<std::size_t>(l)];
    std::memcpy(mutable_row_of(out, l), row_of(x, row), static_cast<std::size_t>(x.cols) * sizeof(float));
  }
}

void cpu_backend::refine_logits(tensor_view x, tensor_view table, int candidates, tensor_view logits) {
  check_f32_matrix(x, "refine_logits", "x must be f32");
  check_f32_matrix(logits, "refine_logits", "logits must be f32");
  require(logits.rows == x.rows && table.rows == logits.cols && table.cols == x.cols, "refine_logits",
          "x must be [L, H], table [V, H] and logits [L, V]");
  require(candidates >= 1 && candidates <= logits.cols, "refine_logits", "candidates must be in [1, V]");
  // One row a task: a row is a pass over V logits plus `candidates` dot products.
  pool_.parallel_for(x.rows, [&](std::int64_t row, int) {
    std::vector<std::int32_t> ids(static_cast<std::size_t>(candidates));
    std::vector<float> values(ids.size());
    refine_logit_row(row_of(x, row), table.data, table.type, table.row_stride, x.cols, logits.cols, candidates,
                     mutable_row_of(logits, row), ids.data(), values.data());
  });
}

}  // namespace troupe::cpu
