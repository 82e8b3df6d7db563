// Device memory and block copies: the caching allocator hands a released
// block back out, host copies of every size round-trip, swap out / swap in /
// copy-on-write move whole blocks, and a KV write enqueued after a swap-in
// lands after the copy (the compute stream waits for the copy stream).

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <cstring>
#include <random>

#include "tests/gpu/gpu_test_support.hpp"

namespace troupe::gpu_test {
namespace {

using DeviceMemory = cuda_fixture;

TEST_F(DeviceMemory, ReleasedBuffersAreReusedAndCopiesRoundTrip) {
  void* first = nullptr;
  {
    const device_buffer a = gpu().allocate(1000);
    first = a.data();
  }
  const device_buffer again = gpu().allocate(1000);
  EXPECT_EQ(again.data(), first) << "a released block of the same size class is reused";

  auto rng = fresh_rng();
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4096}, std::size_t{5} << 20, std::size_t{33} << 20}) {
    std::vector<std::uint8_t> data(bytes);
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    const device_buffer buffer = gpu().allocate(bytes);
    gpu().copy_to_device(buffer.data(), data.data(), bytes);
    std::vector<std::uint8_t> back(bytes, 0);
    gpu().copy_to_host(back.data(), buffer.data(), bytes);
    EXPECT_EQ(back, data) << bytes << " bytes";
  }
}

TEST_F(DeviceMemory, SwapOutSwapInAndCopyOnWriteMoveWholeBlocks) {
  auto rng = fresh_rng();
  const kv_cache_spec spec{4, 2, 64, 16, 12, dtype::bf16};
  auto cache = gpu().create_kv_cache(spec);
  auto host = gpu().create_host_pool(spec, 10);
  std::vector<std::vector<std::uint8_t>> images(10, std::vector<std::uint8_t>(spec.block_bytes()));
  for (std::int64_t i = 0; i < 10; ++i) {
    for (auto& b : images[static_cast<std::size_t>(i)]) b = static_cast<std::uint8_t>(rng());
    std::memcpy(host->block_data(i), images[static_cast<std::size_t>(i)].data(), spec.block_bytes());
  }
  // Swap in host 0..5 to device 11..6, copy-on-write device 11 -> 0 and 6 -> 1,
  // then swap device 0, 1, 8 out to host 7, 8, 9.
  std::vector<block_copy> in;
  for (std::int32_t i = 0; i < 6; ++i) in.push_back({block_location::host, i, block_location::device, 11 - i});
  gpu().copy_blocks(*cache, host.get(), in);
  gpu().copy_blocks(*cache, nullptr,
                    std::vector<block_copy>{{block_location::device, 11, block_location::device, 0},
                                            {block_location::device, 6, block_location::device, 1}});
  gpu().copy_blocks(*cache, host.get(),
                    std::vector<block_copy>{{block_location::device, 0, block_location::host, 7},
                                            {block_location::device, 1, block_location::host, 8},
                                            {block_location::device, 8, block_location::host, 9}});
  gpu().synchronize();
  const auto host_block = [&](std::int64_t i) {
    const auto* p = static_cast<const std::uint8_t*>(host->block_data(i));
    return std::vector<std::uint8_t>(p, p + spec.block_bytes());
  };
  EXPECT_EQ(host_block(7), images[0]);
  EXPECT_EQ(host_block(8), images[5]);
  EXPECT_EQ(host_block(9), images[3]);  // device 8 came from host 3
  EXPECT_THROW(gpu().copy_blocks(*cache, host.get(),
                                 std::vector<block_copy>{{block_location::host, 0, block_location::host, 1}}),
               std::invalid_argument);
  EXPECT_THROW(gpu().copy_blocks(*cache, host.get(),
                                 std::vector<block_copy>{{block_location::host, 10, block_location::device, 1}}),
               std::invalid_argument);
}

TEST_F(DeviceMemory, KvWritesAfterASwapInLandOnTopOfIt) {
  auto rng = fresh_rng();
  const kv_cache_spec spec{1, 1, 64, 16, 4, dtype::bf16};
  auto cache = gpu().create_kv_cache(spec);
  auto host = gpu().create_host_pool(spec, 1);
  std::memset(host->block_data(0), 0x11, spec.block_bytes());
  step_batch b;
  b.token_ids = {0};
  b.positions = {3};
  b.query_start = {0, 1};
  b.seq_lens = {4};
  b.kv_indptr = {0, 1};
  b.kv_indices = {2};
  b.kv_last_page_len = {4};
  b.slot_mapping = {2 * 16 + 3};
  attention_geometry g{1, 1, 64, 0.125f, {}};
  const auto plan = gpu().plan_step(b, spec, g);
  const auto qkv_bits = random_half_bits(rng, 3 * 64, 1.0f, dtype::bf16);
  const device_matrix qkv = upload_matrix(gpu(), {.type = dtype::bf16, .rows = 1, .cols = 3 * 64}, qkv_bits.data());
  gpu().copy_blocks(*cache, host.get(), std::vector<block_copy>{{block_location::host, 0, block_location::device, 2}});
  gpu().rope_and_write_kv(*plan, qkv.view.col_slice(0, 64), qkv.view.col_slice(64, 64), qkv.view.col_slice(128, 64),
                          *cache, 0);
  gpu().copy_blocks(*cache, host.get(), std::vector<block_copy>{{block_location::device, 2, block_location::host, 0}});
  gpu().synchronize();
  const auto* block = static_cast<const std::uint16_t*>(host->block_data(0));
  const std::int64_t v_row = spec.tile_elements() + 3 * 64;
  for (int d = 0; d < 64; ++d) ASSERT_EQ(block[v_row + d], qkv_bits[128 + d]) << "v dim " << d;
  EXPECT_EQ(block[0], 0x1111) << "the rest of the block is the swapped-in data";
}

}  // namespace
}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA
