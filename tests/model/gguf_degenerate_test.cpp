// GGUF files that are well-formed but degenerate (found with fuzz_gguf):
// each must be a clear error or a harmless result, never undefined
// behaviour or an allocation sized by a number the file made up.

#include <cmath>
#include <limits>

#include "model/gguf.hpp"
#include "model/gguf_model.hpp"
#include "model/gguf_tokenizer.hpp"
#include "tests/model/gguf_test_util.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using namespace testing;  // NOLINT: the byte builders
using ::testing::HasSubstr;

constexpr std::uint32_t f32_type = 0, bf16_type = 30;

std::vector<gguf_kv> one_layer_llama(std::uint32_t key_length) {
  return {kv_string("general.architecture", "llama"), kv_u32("llama.block_count", 1),
          kv_u32("llama.embedding_length", 32),       kv_u32("llama.feed_forward_length", 64),
          kv_u32("llama.attention.head_count", 1),    kv_u32("llama.attention.key_length", key_length)};
}

TEST(GgufDegenerate, RopeFactorsForAHeadWithoutRotaryFrequenciesAreAClearError) {
  // Head size 0 asks for zero divisors; reading the largest of none was undefined.
  temp_dir dir;
  write_file(dir / "m.gguf",
             gguf_bytes(one_layer_llama(0),
                        {{"token_embd.weight", {32, 4}, f32_type, 0}, {"rope_freqs.weight", {0}, f32_type, 512}},
                        std::string(512, '\0')));
  const gguf_file file(dir / "m.gguf");
  EXPECT_THAT(error_of([&] { gguf_model_config(file); }),
              HasSubstr("m.gguf: tensor 'rope_freqs.weight': the head size 0 leaves no rotary frequency to scale"));
}

TEST(GgufDegenerate, AnEmptyTensorWithAHugeRowAllocatesNothing) {
  // [0 rows of 2^40]: no bytes in the file, but the conversion sized its row buffer by the row length.
  const std::uint64_t huge_row = std::uint64_t{1} << 40;
  temp_dir dir;
  write_file(dir / "m.gguf", gguf_bytes(one_layer_llama(32),
                                        {{"token_embd.weight", {32, 4}, bf16_type, 0},
                                         {"blk.0.attn_q.weight", {huge_row, 0}, f32_type, 256}},
                                        std::string(256, '\0')));
  const gguf_file file(dir / "m.gguf");
  ASSERT_EQ(gguf_weight_dtype(file), dtype::bf16);
  gguf_buffers storage;
  const host_tensor out = convert_gguf_tensor(*file.find_tensor("blk.0.attn_q.weight"), "q", dtype::bf16, 1, storage);
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{0, static_cast<std::int64_t>(huge_row)}));
  EXPECT_EQ(out.byte_size(), 0u);
  EXPECT_TRUE(storage.empty());
}

TEST(GgufDegenerate, NonFiniteSentencePieceScoresAreAClearError) {
  // The merges are sorted by score; a NaN breaks the ordering std::sort needs.
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    temp_dir dir;
    write_file(dir / "t.gguf", gguf_bytes({kv_string("tokenizer.ggml.model", "llama"),
                                           kv_strings("tokenizer.ggml.tokens", {"a", "b", "ab"}),
                                           kv_f32s("tokenizer.ggml.scores", {-1.0f, bad, -3.0f})},
                                          {}, ""));
    EXPECT_THAT(error_of([&] { load_gguf_tokenizer(gguf_file(dir / "t.gguf")); }),
                HasSubstr("t.gguf: metadata key 'tokenizer.ggml.scores': entry 1 is not a finite number"));
  }
}

}  // namespace
}  // namespace troupe
