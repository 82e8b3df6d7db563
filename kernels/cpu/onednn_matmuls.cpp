#include "kernels/cpu/onednn_matmuls.hpp"

#include <omp.h>

#include <algorithm>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_backend_impl.hpp"

namespace troupe::cpu {

namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;
constexpr dnnl::memory::dim runtime = DNNL_RUNTIME_DIM_VAL;

// Converted f32 weight panels are kept near L2-sized.
constexpr std::int64_t panel_bytes = std::int64_t{4} << 20;

struct primitive_key {
  std::int64_t width = 0, k = 0;
  dt src = dt::f32, weights = dt::f32;
  bool bias = false;
  auto operator<=>(const primitive_key&) const = default;
};

struct cached_matmul {
  dnnl::matmul primitive;
  dnnl::memory::desc scratchpad;
};

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

struct onednn_matmuls::state {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  bool bf16_compute = false;
  std::vector<dnnl::stream> streams;                    // one per pool thread
  std::vector<std::vector<unsigned char>> scratch;      // oneDNN scratchpads, per thread
  std::vector<std::vector<float>> panels;               // widened weight panels, per thread
  std::vector<std::vector<std::uint16_t>> bf16_panels;  // dequantised weight panels, per thread
  std::vector<std::uint16_t> x_bf16;                    // [M][K] activations rounded to bf16
  std::map<primitive_key, cached_matmul> primitives;

  const cached_matmul& primitive_for(const primitive_key& key) {
    auto found = primitives.find(key);
    if (found != primitives.end()) return found->second;
    const dnnl::memory::desc src({runtime, key.k}, key.src, dims{runtime, 1});
    const dnnl::memory::desc weights({key.k, key.width}, key.weights, dims{1, key.k});
    const dnnl::memory::desc dst({runtime, key.width}, dt::f32, dims{runtime, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto desc = key.bias ? dnnl::matmul::desc(
                                     src, weights, dnnl::memory::desc({1, key.width}, dt::f32, dims{key.width, 1}), dst)
                               : dnnl::matmul::desc(src, weights, dst);
    const dnnl::matmul::primitive_desc pd(desc, attr, engine);
    return primitives.emplace(key, cached_matmul{dnnl::matmul(pd), pd.scratchpad_desc()}).first->second;
  }
};

onednn_matmuls::onednn_matmuls(int threads, bool bf16_compute) : state_(std::make_unique<state>()) {
  state_->bf16_compute = bf16_compute;
  for (int t = 0; t < threads; ++t) state_->streams.emplace_back(state_->engine);
  state_->scratch.resize(static_cast<std::size_t>(threads));
  state_->panels.resize(static_cast<std::size_t>(threads));
  state_->bf16_panels.resize(static_cast<std::size_t>(threads));
}

onednn_matmuls::~onednn_matmuls() = default;

/// How one linear call is cut into per-thread panels of output columns.
struct panel_plan {
  bool bf16_direct = false;  ///< bf16 × bf16 → f32 in oneDNN
  bool widen = false;        ///< 16-bit weights converted to f32 panel by panel
  bool dequantize = false;   ///< quantised weights expanded to bf16 panel by panel
  std::int64_t width = 0, tasks = 0;
  const cached_matmul* full = nullptr;  ///< primitive for a panel of `width` columns
  const cached_matmul* last = nullptr;  ///< primitive for the last, narrower panel
};

void onednn_matmuls::run(thread_pool& pool, const isa_kernels& kernels, tensor_view x, const cpu_linear_weight& w,
                         tensor_view out) {
  state& s = *state_;
  panel_plan plan;
  plan.dequantize = w.quantized;
  plan.bf16_direct = (w.type == dtype::bf16 || plan.dequantize) && s.bf16_compute;
  plan.widen = (w.type != dtype::f32 || plan.dequantize) && !plan.bf16_direct;
  // One panel per thread (A is packed once per panel), smaller when weights are widened or dequantised.
  plan.width = round_up((w.rows + pool.size() - 1) / pool.size(), 16);
  if (plan.widen || plan.dequantize)
    plan.width = std::clamp<std::int64_t>(panel_bytes / (w.cols * (plan.widen ? 4 : 2)) / 16 * 16, 16, plan.width);
  plan.width = std::min(plan.width, w.rows);
  plan.tasks = (w.rows + plan.width - 1) / plan.width;
  const dt src_type = plan.bf16_direct ? dt::bf16 : dt::f32;
  primitive_key key{plan.width, w.cols, src_type, src_type, !w.bias.empty()};
  try {
    plan.full = &s.primitive_for(key);
    key.width = w.rows - (plan.tasks - 1) * plan.width;
    plan.last = &s.primitive_for(key);
  } catch (const dnnl::error& e) {
    if (!plan.bf16_direct) throw std::runtime_error(std::string("oneDNN matmul unavailable: ") + e.what());
    s.bf16_compute = false;  // this oneDNN build lacks bf16 here: widen instead
    run(pool, kernels, x, w, out);
    return;
  }
  for (const cached_matmul* matmul : {plan.full, plan.last}) {
    for (auto& buffer : s.scratch) buffer.resize(std::max(buffer.size(), matmul->scratchpad.get_size()));
  }
  const auto panel_elements = static_cast<std::size_t>(plan.width * w.cols);
  if (plan.widen) {
    for (auto& panel : s.panels) panel.resize(std::max(panel.size(), panel_elements));
  }
  if (plan.dequantize) {
    for (auto& panel : s.bf16_panels) panel.resize(std::max(panel.size(), panel_elements));
  }
  if (plan.bf16_direct) round_activations(pool, kernels, x);
  pool.parallel_for(plan.tasks,
                    [&](std::int64_t task, int thread) { run_panel(plan, kernels, x, w, out, task, thread); });
}

void onednn_matmuls::round_activations(thread_pool& pool, const isa_kernels& kernels, tensor_view x) {
  state& s = *state_;
  const std::int64_t m = x.rows, k = x.cols;
  s.x_bf16.resize(static_cast<std::size_t>(m * k));
  const std::int64_t per = rows_per_task(m, k, pool.size());
  pool.parallel_for((m + per - 1) / per, [&](std::int64_t task, int) {
    for (std::int64_t r = task * per; r < std::min(m, (task + 1) * per); ++r)
      kernels.from_f32(x.as<const float>() + r * x.row_stride, s.x_bf16.data() + r * k, elem::bf16, k);
  });
}

void onednn_matmuls::run_panel(const panel_plan& plan, const isa_kernels& kernels, tensor_view x,
                               const cpu_linear_weight& w, tensor_view out, std::int64_t task, int thread) {
  state& s = *state_;
  omp_set_num_threads(1);  // oneDNN runs inline on this pool thread
  const std::int64_t m = x.rows, k = w.cols, n0 = task * plan.width, cols = std::min(plan.width, w.rows - n0);
  const cached_matmul& matmul = cols == plan.width ? *plan.full : *plan.last;
  const void* weights = static_cast<const char*>(w.data) + static_cast<std::size_t>(n0 * k) * dtype_size(w.type);
  elem weight_type = static_cast<elem>(w.type);
  if (plan.dequantize) {
    std::uint16_t* panel = s.bf16_panels[static_cast<std::size_t>(thread)].data();
    kernels.dequantize_rows(w.packed, n0, n0 + cols, panel);
    weights = panel;
    weight_type = elem::bf16;
  }
  if (plan.widen) {
    float* panel = s.panels[static_cast<std::size_t>(thread)].data();
    kernels.to_f32(weights, weight_type, panel, cols * k);
    weights = panel;
  }
  const dt src_type = plan.bf16_direct ? dt::bf16 : dt::f32;
  void* src_data = plan.bf16_direct ? static_cast<void*>(s.x_bf16.data()) : x.data;
  const dnnl::memory src({{m, k}, src_type, dims{plan.bf16_direct ? k : x.row_stride, 1}}, s.engine, src_data);
  const dnnl::memory wei({{k, cols}, src_type, dims{1, k}}, s.engine, const_cast<void*>(weights));
  const dnnl::memory dst({{m, cols}, dt::f32, dims{out.row_stride, 1}}, s.engine, out.as<float>() + n0);
  const dnnl::memory scratch(matmul.scratchpad, s.engine, s.scratch[static_cast<std::size_t>(thread)].data());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratch}};
  if (!w.bias.empty()) {
    args.emplace(DNNL_ARG_BIAS,
                 dnnl::memory({{1, cols}, dt::f32, dims{cols, 1}}, s.engine, const_cast<float*>(w.bias.data() + n0)));
  }
  dnnl::stream& stream = s.streams[static_cast<std::size_t>(thread)];
  matmul.primitive.execute(stream, args);
  stream.wait();
}

}  // namespace troupe::cpu
