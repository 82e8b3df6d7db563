// Norms, SiLU-and-multiply, embedding and logits-row gathers against scalar
// references on fresh random inputs, outputs poisoned before each run.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <cmath>
#include <cstring>

#include "kernels/dtype.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace troupe::gpu_test {
namespace {

using Elementwise = cuda_fixture;

std::vector<float> as_floats(const std::vector<std::uint16_t>& bits) {
  std::vector<float> v(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) v[i] = bf16_to_float(bits[i]);
  return v;
}

// out = v / sqrt(mean(v²) + eps) * w, in double.
std::vector<double> rms_reference(const std::vector<float>& v, std::int64_t rows, std::int64_t cols,
                                  const std::vector<float>& w, float eps) {
  std::vector<double> out(v.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double squares = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) squares += double(v[r * cols + c]) * v[r * cols + c];
    const double inverse = 1.0 / std::sqrt(squares / double(cols) + eps);
    for (std::int64_t c = 0; c < cols; ++c) out[r * cols + c] = v[r * cols + c] * inverse * w[c];
  }
  return out;
}

TEST_F(Elementwise, RmsNormMatchesReferenceOverShapesStridesAndWeightTypes) {
  auto rng = fresh_rng();
  for (const auto& [rows, cols] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 64}, {3, 1000}, {17, 4096}, {64, 8192}, {129, 2047}}) {
    for (dtype weight_type : {dtype::f32, dtype::bf16, dtype::f16}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " weight " +
                   std::string(dtype_name(weight_type)));
      const auto x_bits = random_half_bits(rng, static_cast<std::size_t>(rows * cols), 2.0f, dtype::bf16);
      const auto w_floats = random_floats(rng, static_cast<std::size_t>(cols), 1.0f);
      host_tensor w_host{"norm.weight", dtype::f32, {cols}, w_floats.data()};
      std::vector<std::uint16_t> w_half(static_cast<std::size_t>(cols));
      std::vector<float> w_used = w_floats;
      if (weight_type != dtype::f32) {
        for (std::size_t c = 0; c < w_half.size(); ++c) {
          w_half[c] = float_to_half_bits(w_floats[c], weight_type);
          w_used[c] = half_bits_to_float(w_half[c], weight_type);
        }
        w_host = host_tensor{"norm.weight", weight_type, {cols}, w_half.data()};
      }
      const device_tensor weight = gpu().upload(w_host);
      const device_matrix x =
          upload_matrix(gpu(), {.type = dtype::bf16, .rows = rows, .cols = cols, .stride = cols + 24}, x_bits.data());
      const device_matrix out =
          poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = rows, .cols = cols, .stride = cols + 8});
      gpu().rms_norm(x.view, weight.view, 1e-5f, out.view);
      EXPECT_TRUE(all_close(download_floats(gpu(), out.view),
                            rms_reference(as_floats(x_bits), rows, cols, w_used, 1e-5f), bf16_rtol));
    }
  }
}

TEST_F(Elementwise, RmsNormInPlaceAndRawBf16Weights) {
  auto rng = fresh_rng();
  const std::int64_t rows = 5, cols = 3072;
  const auto x_bits = random_half_bits(rng, rows * cols, 1.0f, dtype::bf16);
  const auto w_bits = random_half_bits(rng, cols, 1.0f, dtype::bf16);
  const device_matrix x = upload_matrix(gpu(), {.type = dtype::bf16, .rows = rows, .cols = cols}, x_bits.data());
  const device_matrix w = upload_matrix(gpu(), {.type = dtype::bf16, .rows = 1, .cols = cols}, w_bits.data());
  gpu().rms_norm(x.view, w.view, 1e-6f, x.view);
  EXPECT_TRUE(all_close(download_floats(gpu(), x.view),
                        rms_reference(as_floats(x_bits), rows, cols, as_floats(w_bits), 1e-6f), bf16_rtol));
}

TEST_F(Elementwise, AddRmsNormUpdatesResidualExactlyAndNormalisesIt) {
  auto rng = fresh_rng();
  for (const auto& [rows, cols] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 896}, {33, 4096}, {300, 1536}}) {
    const auto r_bits = random_half_bits(rng, rows * cols, 3.0f, dtype::bf16);
    const auto x_bits = random_half_bits(rng, rows * cols, 1.0f, dtype::bf16);
    const auto w = random_floats(rng, cols, 1.0f);
    const device_tensor weight = gpu().upload(host_tensor{"w", dtype::f32, {cols}, w.data()});
    const device_matrix residual =
        upload_matrix(gpu(), {.type = dtype::bf16, .rows = rows, .cols = cols, .stride = cols + 8}, r_bits.data());
    const device_matrix x = upload_matrix(gpu(), {.type = dtype::bf16, .rows = rows, .cols = cols}, x_bits.data());
    const device_matrix out = poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = rows, .cols = cols});
    gpu().add_rms_norm(residual.view, x.view, weight.view, 1e-5f, out.view);
    std::vector<float> summed(r_bits.size());
    for (std::size_t i = 0; i < summed.size(); ++i)
      summed[i] = bf16_to_float(float_to_bf16(bf16_to_float(r_bits[i]) + bf16_to_float(x_bits[i])));
    EXPECT_EQ(download_floats(gpu(), residual.view), summed) << "residual must hold bf16(residual + x)";
    EXPECT_TRUE(all_close(download_floats(gpu(), out.view), rms_reference(summed, rows, cols, w, 1e-5f), bf16_rtol));
  }
}

TEST_F(Elementwise, HeadRmsNormNormalisesEachHeadInPlace) {
  auto rng = fresh_rng();
  for (int head_dim : {64, 128}) {
    const std::int64_t rows = 19, heads = 12, cols = heads * head_dim;
    const auto x_bits = random_half_bits(rng, rows * cols, 2.0f, dtype::bf16);
    const auto w = random_floats(rng, head_dim, 1.0f);
    const device_tensor weight = gpu().upload(host_tensor{"q_norm", dtype::f32, {head_dim}, w.data()});
    // x is the q part of a wider qkv row, as the model passes it.
    const device_matrix x = upload_matrix(
        gpu(), {.type = dtype::bf16, .rows = rows, .cols = cols, .stride = cols + 2 * 128}, x_bits.data());
    gpu().head_rms_norm(x.view, head_dim, weight.view, 1e-6f);
    EXPECT_TRUE(all_close(download_floats(gpu(), x.view),
                          rms_reference(as_floats(x_bits), rows * heads, head_dim, w, 1e-6f), bf16_rtol));
  }
}

TEST_F(Elementwise, SiluMulMatchesReference) {
  auto rng = fresh_rng();
  for (const auto& [rows, features] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 11008}, {70, 2816}, {9, 100}}) {
    const auto gate_up = random_half_bits(rng, rows * 2 * features, 3.0f, dtype::bf16);
    const device_matrix in =
        upload_matrix(gpu(), {.type = dtype::bf16, .rows = rows, .cols = 2 * features}, gate_up.data());
    const device_matrix out =
        poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = rows, .cols = features, .stride = features + 16});
    gpu().silu_mul(in.view, out.view);
    std::vector<double> want(static_cast<std::size_t>(rows * features));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t f = 0; f < features; ++f) {
        const double g = bf16_to_float(gate_up[r * 2 * features + f]);
        const double u = bf16_to_float(gate_up[r * 2 * features + features + f]);
        want[r * features + f] = g / (1.0 + std::exp(-g)) * u;
      }
    }
    EXPECT_TRUE(all_close(download_floats(gpu(), out.view), want, bf16_rtol));
  }
}

TEST_F(Elementwise, EmbedAndLogitsRowsGatherExactRows) {
  auto rng = fresh_rng();
  const std::int64_t vocab = 5000, hidden = 1000;
  const auto table_bits = random_half_bits(rng, vocab * hidden, 1.0f, dtype::bf16);
  const device_tensor table = gpu().upload(host_tensor{"embed", dtype::bf16, {vocab, hidden}, table_bits.data()});
  step_batch batch;
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(vocab - 1));
  for (int t = 0; t < 37; ++t) {
    batch.token_ids.push_back(t == 0 ? 0 : t == 1 ? static_cast<std::int32_t>(vocab - 1) : token(rng));
    batch.positions.push_back(t);
    batch.slot_mapping.push_back(t);
  }
  batch.query_start = {0, 37};
  batch.seq_lens = {37};
  batch.kv_indptr = {0, 3};
  batch.kv_indices = {0, 1, 2};
  batch.kv_last_page_len = {5};
  batch.logits_indices = {36, 0, 20};
  const kv_cache_spec spec{1, 1, 64, 16, 3, dtype::bf16};
  attention_geometry geometry{1, 1, 64, 0.125f, {}};
  const auto plan = gpu().plan_step(batch, spec, geometry);
  const device_matrix hidden_states =
      poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = 37, .cols = hidden, .stride = hidden + 8});
  gpu().embed(*plan, table.view, hidden_states.view);
  const auto got = download_bytes(gpu(), hidden_states.view);
  for (std::size_t t = 0; t < batch.token_ids.size(); ++t)
    ASSERT_EQ(0, std::memcmp(got.data() + t * hidden * 2, table_bits.data() + batch.token_ids[t] * hidden, hidden * 2))
        << "row " << t;

  const device_matrix rows = poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = 3, .cols = hidden});
  gpu().gather_logits_rows(*plan, hidden_states.view, rows.view);
  const auto gathered = download_bytes(gpu(), rows.view);
  for (std::size_t l = 0; l < batch.logits_indices.size(); ++l)
    EXPECT_EQ(0, std::memcmp(gathered.data() + l * hidden * 2, got.data() + batch.logits_indices[l] * hidden * 2,
                             hidden * 2));

  batch.token_ids[3] = static_cast<std::int32_t>(vocab);
  const auto bad_plan = gpu().plan_step(batch, spec, geometry);
  EXPECT_THROW(gpu().embed(*bad_plan, table.view, hidden_states.view), std::invalid_argument);
}

TEST_F(Elementwise, UploadKeepsVectorsAsF32AndTablesAsBf16) {
  auto rng = fresh_rng();
  const auto values = random_floats(rng, 300, 1.0f);
  const device_tensor vector = gpu().upload(host_tensor{"v", dtype::f32, {300}, values.data()});
  EXPECT_EQ(vector.view.type, dtype::f32);
  EXPECT_EQ(download_floats(gpu(), vector.view), values);
  std::vector<std::uint16_t> halves(300);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = float_to_f16(values[i]);
  const device_tensor table = gpu().upload(host_tensor{"t", dtype::f16, {3, 100}, halves.data()});
  EXPECT_EQ(table.view.type, dtype::bf16);
  EXPECT_EQ(table.view.rows, 3);
  const auto got = download_floats(gpu(), table.view);
  for (std::size_t i = 0; i < halves.size(); ++i)
    ASSERT_EQ(got[i], bf16_to_float(float_to_bf16(f16_to_float(halves[i]))));
}

}  // namespace
}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA
