// `troupe bench-kernels`: the CPU backend's kernels against the machine's
// copy bandwidth: memcpy, GEMV (decode) on Llama-3.2-1B weight shapes with
// weights copied or used in place from a file mapping, oneDNN GEMM
// (prefill), paged attention (decode and verify), and the pool's dispatch cost.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/copy_bandwidth.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/stored_code_source.hpp"
#include "model/gguf.hpp"
#include "model/gguf_stored_codes.hpp"
#include "tools/cli/command_registry.hpp"

namespace {

using namespace troupe;

struct bench_arguments {
  int threads = 0;
  std::string isa;
  int repeats = 15;
  std::size_t copy_mib = 1024;
  bool skip_mapped = false;
  std::vector<std::string> sections = {"decode", "gemv", "gemm", "quantized", "attention"};

  bool wants(const std::string& section) const {
    return std::find(sections.begin(), sections.end(), section) != sections.end();
  }
};

template <class F>
double median_seconds(int repeats, F&& run) {
  run();  // warm caches, page tables and primitive caches
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void print_row(const char* what, const std::string& shape, double seconds, double value, const char* unit) {
  std::printf("  %-26s %-30s %10.3f ms %10.1f %s\n", what, shape.c_str(), seconds * 1e3, value, unit);
}

std::vector<std::uint16_t> random_bf16(std::size_t count) {
  std::vector<std::uint16_t> values(count);
  std::mt19937 engine(7);
  std::uniform_real_distribution<float> uniform(-0.05f, 0.05f);
  for (auto& v : values) v = float_to_bf16(uniform(engine));
  return values;
}

/// A random GGUF Q4_K matrix of rows × cols (cols a multiple of 256): every
/// block's d and dmin 1e-3, its scales, mins and codes random bytes.
std::vector<std::byte> random_q4_k(std::int64_t rows, std::int64_t cols) {
  constexpr std::size_t block_bytes = 144;
  std::vector<std::byte> bytes(static_cast<std::size_t>(rows * cols / 256) * block_bytes);
  std::mt19937 engine(7);
  for (auto& b : bytes) b = static_cast<std::byte>(engine());
  const std::uint16_t factor = float_to_f16(1e-3f);
  for (std::size_t at = 0; at < bytes.size(); at += block_bytes) {
    std::memcpy(&bytes[at], &factor, 2);
    std::memcpy(&bytes[at + 2], &factor, 2);
  }
  return bytes;
}

/// A weight file holding `copies` back-to-back copies of a matrix, written
/// to disk and mapped read-only like a safetensors shard.
class mapped_weights {
 public:
  mapped_weights(const std::vector<std::uint16_t>& values, int copies) : bytes_(values.size() * 2 * copies) {
    path_ = std::filesystem::temp_directory_path() / ("troupe-bench-" + std::to_string(getpid()) + ".bin");
    const int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) throw std::runtime_error("cannot create " + path_.string());
    bool written = true;
    for (int c = 0; c < copies && written; ++c)
      written = write(fd, values.data(), values.size() * 2) == static_cast<ssize_t>(values.size() * 2);
    data_ = written ? mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    std::filesystem::remove(path_);
    if (data_ == MAP_FAILED) throw std::runtime_error("cannot write and map " + path_.string());
  }
  ~mapped_weights() { munmap(data_, bytes_); }
  mapped_weights(const mapped_weights&) = delete;
  mapped_weights& operator=(const mapped_weights&) = delete;
  const void* copy(std::size_t index, std::size_t matrix_bytes) const {
    return static_cast<const char*>(data_) + index * matrix_bytes;
  }

 private:
  std::filesystem::path path_;
  std::size_t bytes_;
  void* data_ = nullptr;
};

// Decode streams ~all weights once per token, so the GEMV timing cycles
// through enough copies of a matrix to overflow the last-level cache.
constexpr double streamed_bytes = 512e6;

int copies_for(double matrix_bytes) { return std::max(1, static_cast<int>(streamed_bytes / matrix_bytes + 0.5)); }

/// The dispatch level the benchmark runs at (--isa or the detected one).
cpu::isa_level bench_level(const bench_arguments& args) {
  return args.isa.empty() ? cpu::detected_isa() : cpu::parse_isa(args.isa).value_or(cpu::detected_isa());
}

std::unique_ptr<backend> make_bench_backend(const bench_arguments& args, cpu::weight_placement placement,
                                            int gemv_max_rows = -1, int quantized_gemv_max_rows = -1,
                                            bool bf16_panels = true) {
  cpu::cpu_backend_options options;
  options.threads = args.threads;
  options.weights = placement;
  options.gemv_max_rows = gemv_max_rows;
  options.quantized_gemv_max_rows = quantized_gemv_max_rows;
  options.bf16_panels = bf16_panels;
  if (!args.isa.empty()) {
    options.max_isa = cpu::parse_isa(args.isa);
    if (!options.max_isa) throw std::runtime_error("--isa: unknown level '" + args.isa + "'");
  }
  return cpu::make_cpu_backend(options);
}

/// Median seconds of one linear() of x [m, k] by a [n, k] weight, averaged
/// over the given copies of the weight (run back to back).
double time_linear(backend& b, const std::vector<host_tensor>& copies, std::int64_t m, int repeats,
                   weight_quantization format = weight_quantization::none) {
  const std::int64_t n = copies.front().shape[0], k = copies.front().shape[1];
  std::vector<std::unique_ptr<linear_weight>> prepared;
  for (const host_tensor& weight : copies)
    prepared.push_back(b.prepare_quantized_linear(std::span(&weight, 1), {}, format));
  device_buffer x = b.allocate(static_cast<std::size_t>(m * k) * sizeof(float));
  device_buffer out = b.allocate(static_cast<std::size_t>(m * n) * sizeof(float));
  std::fill_n(static_cast<float*>(x.data()), m * k, 0.01f);
  const double total = median_seconds(repeats, [&] {
    for (const auto& weight : prepared) b.linear(x.view(dtype::f32, m, k), *weight, out.view(dtype::f32, m, n));
  });
  return total / static_cast<double>(prepared.size());
}

double time_linear(backend& b, const host_tensor& weight, std::int64_t m, int repeats) {
  return time_linear(b, std::vector<host_tensor>{weight}, m, repeats);
}

void bench_gemv(const bench_arguments& args) {
  std::printf("GEMV, M = 1, weight bytes read per second (Llama-3.2-1B shapes, %.0f MB streamed per run):\n",
              streamed_bytes / 1e6);
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{3072, 2048}, {2048, 8192}, {8192, 2048}, {128256, 2048}};
  auto copied = make_bench_backend(args, cpu::weight_placement::copy);
  auto row_major = make_bench_backend(args, cpu::weight_placement::copy, -1, -1, false);
  auto in_place = make_bench_backend(args, cpu::weight_placement::mapped);
  const bool panels = cpu::bf16_panels_at(bench_level(args));
  for (auto [n, k] : shapes) {
    const auto values = random_bf16(static_cast<std::size_t>(n * k));
    const std::string shape = std::to_string(n) + "x" + std::to_string(k) + " bf16";
    const double bytes = static_cast<double>(n * k * 2);
    const int copies = copies_for(bytes);
    const std::vector<host_tensor> tensors(static_cast<std::size_t>(copies),
                                           host_tensor{"w", dtype::bf16, {n, k}, values.data()});
    double t = time_linear(*copied, tensors, 1, args.repeats);
    print_row(panels ? "gemv panels+hugepages" : "gemv copied+hugepages", shape, t, bytes / t / 1e9, "GB/s");
    if (panels) {
      t = time_linear(*row_major, tensors, 1, args.repeats);
      print_row("gemv copied+hugepages", shape, t, bytes / t / 1e9, "GB/s");
    }
    if (!args.skip_mapped) {
      const mapped_weights file(values, copies);
      std::vector<host_tensor> mapped;
      for (int c = 0; c < copies; ++c)
        mapped.push_back({"w", dtype::bf16, {n, k}, file.copy(static_cast<std::size_t>(c), values.size() * 2)});
      t = time_linear(*in_place, mapped, 1, args.repeats);
      print_row("gemv in place (file map)", shape, t, bytes / t / 1e9, "GB/s");
    }
  }
  for (dtype type : {dtype::f32, dtype::f16}) {
    const std::int64_t n = 8192, k = 2048;
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n * k) * dtype_size(type), 0);
    const auto values = random_bf16(static_cast<std::size_t>(n * k));
    convert_elements(values.data(), dtype::bf16, bytes.data(), type, values.size());
    const std::vector<host_tensor> tensors(static_cast<std::size_t>(copies_for(static_cast<double>(bytes.size()))),
                                           host_tensor{"w", type, {n, k}, bytes.data()});
    const double t = time_linear(*copied, tensors, 1, args.repeats);
    print_row("gemv copied+hugepages", "8192x2048 " + std::string(dtype_name(type)), t,
              static_cast<double>(bytes.size()) / t / 1e9, "GB/s");
  }
}

void print_quantized_row(const char* name, const std::string& shape, std::int64_t m, std::int64_t weights,
                         double seconds, double bytes) {
  std::printf("  %-28s %-28s %9.3f ms %9.1f GFLOP/s %7.1f GB/s\n", name, shape.c_str(), seconds * 1e3,
              2.0 * static_cast<double>(m * weights) / seconds / 1e9, bytes / seconds / 1e9);
}

void bench_quantized(const bench_arguments& args) {
  const int integer_rows = cpu::default_quantized_gemv_max_rows(bench_level(args));
  const std::string handover = integer_rows == std::numeric_limits<int>::max()
                                   ? std::string("at every row count")
                                   : "up to " + std::to_string(integer_rows) + " rows";
  std::printf(
      "Quantised weights (8192x2048, weights streamed from memory), GFLOP/s and weight GB/s;\n"
      "from 64 rows both quantised paths (the default takes the integer one %s):\n",
      handover.c_str());
  const auto integer = make_bench_backend(args, cpu::weight_placement::copy, -1, std::numeric_limits<int>::max());
  const auto dequantised = make_bench_backend(args, cpu::weight_placement::copy, -1, 0);
  const std::int64_t n = 8192, k = 2048;
  const auto values = random_bf16(static_cast<std::size_t>(n * k));
  const host_tensor tensor{"w", dtype::bf16, {n, k}, values.data()};
  const std::vector<std::byte> q4_k_bytes = random_q4_k(n, k);
  gguf_tensor q4_k_file{"w", ggml_type::q4_k, {static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n)}};
  q4_k_file.bytes = q4_k_bytes.size();
  q4_k_file.data = q4_k_bytes.data();
  host_tensor q4_k{"w", dtype::bf16, {n, k}, nullptr};
  q4_k.stored_codes = gguf_stored_code_source(q4_k_file, 0);
  for (std::int64_t m : {1, 8, 32, 64, 128, 512}) {
    for (auto format : {weight_quantization::none, weight_quantization::int8, weight_quantization::int4,
                        weight_quantization::int4_asym, weight_quantization::int5_asym, weight_quantization::int4_nl,
                        weight_quantization::int6, weight_quantization::int4_g16}) {
      // Codes plus an f16 scale (and for int4_asym / int5_asym an f16 offset)
      // per 32 inputs; int4, int6 and int4_g16, quantised here, as block
      // factors: a byte per 32 (int6, int4_g16: per 16) inputs and an f16 per 256.
      const bool offsets = quantization_group_offsets(format);
      const int bits = quantization_code_bits(format);
      double bytes_per_weight = bits / 8.0 + (offsets ? 4.0 : 2.0) / 32.0;
      if (format == weight_quantization::none) bytes_per_weight = 2.0;
      if (format == weight_quantization::int8) bytes_per_weight = 1.0;
      if (format == weight_quantization::int4) bytes_per_weight = 0.5 + 1.0 / 32.0 + 2.0 / 256.0;
      if (format == weight_quantization::int6) bytes_per_weight = 0.75 + 1.0 / 16.0 + 2.0 / 256.0;
      if (format == weight_quantization::int4_g16) bytes_per_weight = 0.5 + 1.0 / 16.0 + 2.0 / 256.0;
      const double bytes = bytes_per_weight * static_cast<double>(n * k);
      const std::vector<host_tensor> copies(static_cast<std::size_t>(m > 32 ? 1 : copies_for(bytes)), tensor);
      const bool both = m >= 64 && format != weight_quantization::none;
      for (backend* path : {integer.get(), dequantised.get()}) {
        if (path == dequantised.get() && !both) continue;
        const double t = time_linear(*path, copies, m, m > 32 ? 3 : args.repeats, format);
        print_quantized_row(!both                   ? "linear"
                            : path == integer.get() ? "linear integer"
                                                    : "linear dequantised",
                            std::to_string(m) + "x8192x2048 " + std::string(quantization_name(format)), m, n * k, t,
                            bytes);
      }
    }
    // A GGUF Q4_K matrix kept as stored: int4_asym with its block factors,
    // 4.625 bits a weight (kernels/cpu/README.md).
    const double bytes = (0.5 + 5.0 / 64.0) * static_cast<double>(n * k);
    const std::vector<host_tensor> copies(static_cast<std::size_t>(m > 32 ? 1 : copies_for(bytes)), q4_k);
    const double t = time_linear(*integer, copies, m, m > 32 ? 3 : args.repeats, weight_quantization::int4_asym);
    print_quantized_row("linear", std::to_string(m) + "x8192x2048 Q4_K", m, n * k, t, bytes);
  }
}

std::string gemm_shape(std::int64_t m, std::int64_t n, std::int64_t k, dtype type) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " + std::string(dtype_name(type));
}

void bench_gemm(const bench_arguments& args) {
  std::printf("GEMM: oneDNN, the skinny GEMM and (bf16, where the level has it) the panel GEMM, GFLOP/s:\n");
  auto onednn = make_bench_backend(args, cpu::weight_placement::copy, 0, -1, false);
  auto skinny = make_bench_backend(args, cpu::weight_placement::copy, 1 << 20, -1, false);
  auto panels =
      cpu::bf16_panels_at(bench_level(args)) ? make_bench_backend(args, cpu::weight_placement::copy) : nullptr;
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{2048, 2048}, {8192, 2048}};
  for (dtype type : {dtype::bf16, dtype::f32}) {
    for (auto [n, k] : shapes) {
      const auto values = random_bf16(static_cast<std::size_t>(n * k));
      std::vector<std::uint8_t> bytes(values.size() * dtype_size(type));
      convert_elements(values.data(), dtype::bf16, bytes.data(), type, values.size());
      const host_tensor tensor{"w", type, {n, k}, bytes.data()};
      const bool paneled = panels != nullptr && type == dtype::bf16;
      double t = time_linear(*onednn, tensor, 512, std::max(3, args.repeats / 3));
      print_row("gemm onednn", gemm_shape(512, n, k, type), t, 2.0 * 512 * n * k / t / 1e9, "GFLOP/s");
      if (paneled) {
        t = time_linear(*panels, tensor, 512, std::max(3, args.repeats / 3));
        print_row("panel gemm", gemm_shape(512, n, k, type), t, 2.0 * 512 * n * k / t / 1e9, "GFLOP/s");
      }
      if (n != 8192) continue;
      // Where the skinny GEMM hands over to oneDNN (weights streamed from memory).
      const std::vector<host_tensor> copies(static_cast<std::size_t>(copies_for(static_cast<double>(bytes.size()))),
                                            tensor);
      for (std::int64_t m : {1, 2, 4, 8, 16, 32}) {
        double ts = time_linear(*skinny, copies, m, args.repeats);
        print_row("skinny gemm", gemm_shape(m, n, k, type), ts, 2.0 * m * n * k / ts / 1e9, "GFLOP/s");
        ts = time_linear(*onednn, copies, m, args.repeats);
        print_row("gemm onednn", gemm_shape(m, n, k, type), ts, 2.0 * m * n * k / ts / 1e9, "GFLOP/s");
        if (paneled) {
          ts = time_linear(*panels, copies, m, args.repeats);
          print_row("panel gemm", gemm_shape(m, n, k, type), ts, 2.0 * m * n * k / ts / 1e9, "GFLOP/s");
        }
      }
    }
  }
}

/// Attention for `batch` sequences of `context` tokens on a bf16 cache
/// (Llama-3.2-1B heads), the last `tokens` of each queried (1: decode; 5: a
/// verify step of 4 drafts), cycling through enough layers to overflow the
/// last-level cache.
void bench_attention_case(backend& b, int batch, int context, int repeats, int tokens = 1) {
  const int q_heads = 32, kv_heads = 8, head_dim = 64, block = 16;
  const int pages = (context + block - 1) / block;
  const double layer_bytes = 2.0 * batch * context * kv_heads * head_dim * 2;
  const int layers = copies_for(layer_bytes);
  const kv_cache_spec spec{.num_layers = layers,
                           .num_kv_heads = kv_heads,
                           .head_dim = head_dim,
                           .block_size = block,
                           .num_blocks = std::int64_t{pages} * batch,
                           .type = dtype::bf16};
  auto cache = b.create_kv_cache(spec);
  step_batch step;
  step.query_start.push_back(0);
  step.kv_indptr.push_back(0);
  for (int s = 0; s < batch; ++s) {
    for (int position = context - tokens; position < context; ++position) {
      step.token_ids.push_back(1);
      step.positions.push_back(position);
      step.slot_mapping.push_back(std::int64_t{s * pages + position / block} * block + position % block);
      step.logits_indices.push_back(static_cast<std::int32_t>(step.token_ids.size()) - 1);
    }
    step.query_start.push_back(static_cast<std::int32_t>(step.token_ids.size()));
    step.seq_lens.push_back(context);
    for (int p = 0; p < pages; ++p) step.kv_indices.push_back(s * pages + p);
    step.kv_indptr.push_back(static_cast<std::int32_t>(step.kv_indices.size()));
    step.kv_last_page_len.push_back(context - (pages - 1) * block);
  }
  const int rows = batch * tokens;
  attention_geometry geometry{q_heads, kv_heads, head_dim, 0.125f, {}};
  geometry.rope.head_dim = head_dim;
  auto plan = b.plan_step(step, spec, geometry);
  // Real K/V values (not untouched zero pages), written through the ordinary KV path.
  device_buffer q = b.allocate(static_cast<std::size_t>(rows * q_heads * head_dim) * sizeof(float));
  device_buffer kv = b.allocate(static_cast<std::size_t>(rows * kv_heads * head_dim) * sizeof(float));
  device_buffer out = b.allocate(q.bytes());
  std::fill_n(static_cast<float*>(q.data()), rows * q_heads * head_dim, 0.01f);
  std::fill_n(static_cast<float*>(kv.data()), rows * kv_heads * head_dim, 0.02f);
  const tensor_view q_view = q.view(dtype::f32, rows, q_heads * head_dim);
  const tensor_view kv_view = kv.view(dtype::f32, rows, kv_heads * head_dim);
  auto host = b.create_host_pool(spec, 1);
  std::memset(host->block_data(0), 0x3c, spec.block_bytes());
  std::vector<block_copy> fill;
  for (std::int32_t i = 0; i < spec.num_blocks; ++i)
    fill.push_back({block_location::host, 0, block_location::device, i});
  b.copy_blocks(*cache, host.get(), fill);
  b.rope_and_write_kv(*plan, q_view, kv_view, kv_view, *cache, 0);
  const double t = median_seconds(repeats, [&] {
    for (int layer = 0; layer < layers; ++layer)
      b.attention(*plan, q_view, *cache, layer, out.view(dtype::f32, rows, q_heads * head_dim));
  });
  print_row(tokens == 1 ? "attention decode bf16" : "attention verify bf16",
            "batch " + std::to_string(batch) + ", context " + std::to_string(context) +
                (tokens == 1 ? "" : ", " + std::to_string(tokens) + " tokens"),
            t / layers, layer_bytes * layers / t / 1e9, "GB/s");
}

/// Every linear layer of Llama-3.2-1B (16 layers of fused qkv, o, gate_up,
/// down, then the lm_head), bf16, run back to back as one decode step does:
/// the part of decode that streams weights, against the copy bandwidth.
void bench_decode_linears(const bench_arguments& args) {
  std::printf("Llama-3.2-1B linear layers per decode step (bf16, weights copied), vs memcpy just before:\n");
  auto b = make_bench_backend(args, cpu::weight_placement::copy);
  const std::pair<std::int64_t, std::int64_t> layer_shapes[] = {
      {3072, 2048}, {2048, 2048}, {16384, 2048}, {2048, 8192}};
  std::vector<std::vector<std::uint16_t>> sources;
  std::vector<std::unique_ptr<linear_weight>> weights;
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
  double bytes = 0.0;
  for (auto [n, k] : layer_shapes) sources.push_back(random_bf16(static_cast<std::size_t>(n * k)));
  for (int layer = 0; layer <= 16; ++layer) {
    for (std::size_t i = 0; i < (layer < 16 ? 4u : 1u); ++i) {
      const auto [n, k] = layer < 16 ? layer_shapes[i] : std::pair<std::int64_t, std::int64_t>{128256, 2048};
      if (layer == 16) sources.push_back(random_bf16(static_cast<std::size_t>(n * k)));
      const host_tensor tensor{"w", dtype::bf16, {n, k}, (layer < 16 ? sources[i] : sources.back()).data()};
      weights.push_back(b->prepare_linear(std::span(&tensor, 1), {}));
      shapes.emplace_back(n, k);
      bytes += static_cast<double>(n * k * 2);
    }
  }
  for (std::int64_t m : {1, 8}) {
    device_buffer x = b->allocate(static_cast<std::size_t>(m * 8192) * sizeof(float));
    device_buffer out = b->allocate(static_cast<std::size_t>(m * 128256) * sizeof(float));
    std::fill_n(static_cast<float*>(x.data()), m * 8192, 0.01f);
    // The machine's bandwidth drifts (shared hosts): take memcpy right before each run.
    const double copy = cpu::measure_copy_bandwidth(args.threads, std::size_t{512} << 20, 2).all_threads_gbps;
    const double t = median_seconds(std::max(3, args.repeats / 3), [&] {
      for (std::size_t i = 0; i < weights.size(); ++i)
        b->linear(x.view(dtype::f32, m, shapes[i].second), *weights[i], out.view(dtype::f32, m, shapes[i].first));
    });
    const double gbps = bytes / t / 1e9;
    std::printf("  %-26s %-30s %10.3f ms %10.1f GB/s  (%.0f%% of memcpy %.1f GB/s)\n", "decode linears",
                ("batch " + std::to_string(m) + ", " + std::to_string(static_cast<int>(bytes / 1e6)) + " MB").c_str(),
                t * 1e3, gbps, 100.0 * gbps / copy, copy);
  }
}

void bench_dispatch(const bench_arguments& args) {
  cpu::thread_pool pool(args.threads);
  const int jobs = 20000;
  const auto start = std::chrono::steady_clock::now();
  for (int j = 0; j < jobs; ++j) pool.parallel_for(pool.size(), [](std::int64_t, int) {});
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / jobs;
  print_row("pool dispatch (empty job)", std::to_string(pool.size()) + " threads", t, t * 1e6, "us");
}

void run(const bench_arguments& args) {
  const cpu::isa_level isa =
      args.isa.empty() ? cpu::detected_isa() : cpu::parse_isa(args.isa).value_or(cpu::isa_level::scalar);
  std::printf("troupe bench-kernels: cpu backend, kernels %s, %d threads\n", std::string(cpu::isa_name(isa)).c_str(),
              cpu::thread_pool(args.threads).size());
  const auto copy = cpu::measure_copy_bandwidth(args.threads, args.copy_mib << 20);
  std::printf("Copy bandwidth (%zu MiB memcpy, read + write):\n", args.copy_mib);
  std::printf("  %-26s %-30s %10s    %10.1f GB/s\n", "memcpy", "1 thread", "", copy.one_thread_gbps);
  std::printf("  %-26s %-30s %10s    %10.1f GB/s\n", "memcpy", (std::to_string(copy.threads) + " threads").c_str(), "",
              copy.all_threads_gbps);
  bench_dispatch(args);
  if (args.wants("decode")) bench_decode_linears(args);
  if (args.wants("gemv")) bench_gemv(args);
  if (args.wants("gemm")) bench_gemm(args);
  if (args.wants("quantized")) bench_quantized(args);
  if (args.wants("attention")) {
    std::printf(
        "Paged attention (decode; verify steps of 5 tokens), K and V bytes read per second (32 q / 8 kv heads, "
        "head_dim 64, block 16):\n");
    auto b = make_bench_backend(args, cpu::weight_placement::copy);
    for (int context : {512, 2048, 8192, 32768}) bench_attention_case(*b, 1, context, args.repeats);
    bench_attention_case(*b, 8, 2048, args.repeats);
    for (int context : {512, 2048}) bench_attention_case(*b, 1, context, args.repeats, 5);
  }
}

void setup(CLI::App& root) {
  auto args = std::make_shared<bench_arguments>();
  CLI::App* command = root.add_subcommand("bench-kernels", "Measure the CPU backend's kernels against copy bandwidth");
  command->add_option("--threads", args->threads, "Threads per op (0 = all cores)")->capture_default_str();
  command->add_option("--isa", args->isa, "Cap the kernel level: scalar, avx2, avx512, avx512_vnni, avx512_bf16");
  command->add_option("--repeats", args->repeats, "Timed runs per case (the median is shown)")->capture_default_str();
  command->add_option("--copy-mib", args->copy_mib, "Size of the memcpy measurement in MiB")->capture_default_str();
  command->add_flag("--skip-mapped", args->skip_mapped, "Skip the in-place (file-mapped) weight runs");
  command->add_option("--sections", args->sections, "Which parts to run: decode, gemv, gemm, quantized, attention")
      ->delimiter(',')
      ->check(CLI::IsMember({"decode", "gemv", "gemm", "quantized", "attention"}))
      ->capture_default_str();
  command->callback([args] {
    if (args->repeats < 1) throw std::runtime_error("--repeats must be at least 1");
    if (args->copy_mib < 1) throw std::runtime_error("--copy-mib must be at least 1");
    run(*args);
  });
}

const bool registered = troupe::cli::register_command("bench-kernels", setup);

}  // namespace
