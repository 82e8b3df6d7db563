// The GGUF reader against files built byte by byte: every metadata type,
// alignment, and one hostile file per way a header can lie.

#include "model/gguf.hpp"

#include <cmath>

#include "tests/model/gguf_test_util.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using namespace testing;  // NOLINT: the byte builders
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr std::uint32_t f32_type = 0, q8_0_type = 8;

// Opens `bytes` written to m.gguf and returns the error text ("" when it opens).
std::string open_error(const std::string& bytes) {
  temp_dir dir;
  write_file(dir / "m.gguf", bytes);
  return error_of([&] { gguf_file file(dir / "m.gguf"); });
}

// Two f32 tensors back to back, 32-byte aligned: a [2, 3] matrix and a [4] vector.
std::string two_tensors(std::uint64_t second_offset = 32, std::uint32_t second_type = f32_type) {
  return gguf_bytes({kv_string("general.architecture", "llama")},
                    {{"a", {3, 2}, f32_type, 0}, {"b", {4}, second_type, second_offset}}, std::string(48, '\0'));
}

TEST(GgufReader, ReadsEveryMetadataTypeAndTensorView) {
  const std::string u8 = "\x07", i16 = "\xfe\xff";
  const double f64 = 2.5;
  const std::int64_t i64 = -9;
  std::vector<gguf_kv> kvs = {{"u8", 0, u8},
                              {"i8", 1, "\xff"},
                              {"u16", 2, "\x01\x02"},
                              {"i16", 3, i16},
                              kv_u32("u32", 70000),
                              {"i32", 5, u32_bytes(static_cast<std::uint32_t>(-5))},
                              kv_f32("f32", 0.25f),
                              kv_bool("flag", true),
                              kv_string("text", "héllo"),
                              {"u64", 10, u64_bytes(1ull << 40)},
                              {"i64", 11, std::string(reinterpret_cast<const char*>(&i64), 8)},
                              {"f64", 12, std::string(reinterpret_cast<const char*>(&f64), 8)},
                              kv_strings("names", {"a", "", "c"}),
                              kv_i32s("ints", {1, -2, 3}),
                              kv_u32("general.alignment", 64)};
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  std::string data = f32_bytes(values) + std::string(40, '\0') + f32_bytes({7, 8});
  temp_dir dir;
  write_file(dir / "m.gguf", gguf_bytes(kvs, {{"w", {3, 2}, f32_type, 0}, {"v", {2}, f32_type, 64}}, data, 2, 64));
  const gguf_file file(dir / "m.gguf");
  EXPECT_EQ(file.version(), 2u);
  EXPECT_EQ(file.alignment(), 64u);
  EXPECT_EQ(file.find("u8")->unsigned_value, 7u);
  EXPECT_EQ(file.find("i8")->signed_value, -1);
  EXPECT_EQ(file.find("u16")->unsigned_value, 0x0201u);
  EXPECT_EQ(file.find("i16")->signed_value, -2);
  EXPECT_EQ(file.find("u32")->unsigned_value, 70000u);
  EXPECT_EQ(file.find("i32")->signed_value, -5);
  EXPECT_EQ(file.find("f32")->float_value, 0.25);
  EXPECT_EQ(file.find("flag")->unsigned_value, 1u);
  EXPECT_EQ(file.find("text")->text, "héllo");
  EXPECT_EQ(file.find("u64")->unsigned_value, 1ull << 40);
  EXPECT_EQ(file.find("i64")->signed_value, -9);
  EXPECT_EQ(file.find("f64")->float_value, 2.5);
  EXPECT_EQ(file.find("names")->strings, (std::vector<std::string_view>{"a", "", "c"}));
  ASSERT_EQ(file.find("ints")->count, 3u);
  EXPECT_EQ(file.find("ints")->number_at(1), -2.0);
  EXPECT_EQ(file.find("missing"), nullptr);
  ASSERT_EQ(file.tensors().size(), 2u);
  const gguf_tensor* w = file.find_tensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dims, (std::vector<std::uint64_t>{3, 2}));
  EXPECT_EQ(w->bytes, 24u);
  float read[6];
  std::memcpy(read, w->data, sizeof read);
  EXPECT_EQ(std::vector<float>(read, read + 6), values);
  float tail[2];
  std::memcpy(tail, file.find_tensor("v")->data, sizeof tail);
  EXPECT_EQ(tail[1], 8.0f);
}

TEST(GgufReader, EveryTruncationOfAValidFileIsAClearError) {
  const std::string whole = two_tensors();
  ASSERT_EQ(open_error(whole), "");
  for (std::size_t length = 1; length < whole.size(); ++length) {
    const std::string error = open_error(whole.substr(0, length));
    EXPECT_THAT(error, StartsWith("m.gguf: ")) << "length " << length;
  }
  EXPECT_THAT(open_error(whole.substr(0, 10)), HasSubstr("truncated"));
  EXPECT_THAT(open_error(whole.substr(0, whole.size() - 1)), HasSubstr("tensor 'b'"));
  EXPECT_THAT(open_error(whole.substr(0, whole.size() - 1)), HasSubstr("runs past the end of the file"));
}

TEST(GgufReader, RefusesBadMagicAndVersions) {
  std::string bad_magic = two_tensors();
  bad_magic[0] = 'X';
  EXPECT_EQ(open_error(bad_magic), "m.gguf: header: bad magic (not a GGUF file)");
  for (std::uint32_t version : {1u, 4u, 0xffffffffu}) {
    const std::string bytes = gguf_bytes({}, {}, "", version);
    EXPECT_THAT(open_error(bytes), HasSubstr("unsupported GGUF version " + std::to_string(version))) << version;
  }
}

TEST(GgufReader, RefusesCountsAndLengthsThatCannotFit) {
  std::string tensors = gguf_bytes({}, {}, "");
  std::memcpy(tensors.data() + 8, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
  EXPECT_THAT(open_error(tensors), HasSubstr("tensor count 18446744073709551615 cannot fit"));
  std::string metadata = gguf_bytes({}, {}, "");
  std::memcpy(metadata.data() + 16, "\x00\x00\x00\x00\x00\x00\x00\x10", 8);
  EXPECT_THAT(open_error(metadata), HasSubstr("metadata count"));
  const gguf_kv long_string{"text", 8, u64_bytes(~0ull) + "abc"};
  EXPECT_THAT(open_error(gguf_bytes({long_string}, {}, "")),
              HasSubstr("metadata key 'text': string length 18446744073709551615 runs past the end"));
  const gguf_kv long_array{"ints", 9, u32_bytes(5) + u64_bytes(1ull << 62)};
  EXPECT_THAT(open_error(gguf_bytes({long_array}, {}, "")),
              HasSubstr("metadata key 'ints': array of 4611686018427387904 int32 runs past the end"));
  const gguf_kv many_strings{"names", 9, u32_bytes(8) + u64_bytes(1ull << 61)};
  EXPECT_THAT(open_error(gguf_bytes({many_strings}, {}, "")), HasSubstr("strings cannot fit"));
  std::string key = gguf_bytes({kv_u32("k", 1)}, {}, "");
  std::memcpy(key.data() + 24, u64_bytes(1ull << 50).data(), 8);  // the key's own length
  EXPECT_THAT(open_error(key), HasSubstr("metadata entry 0: string length"));
}

TEST(GgufReader, RefusesUnknownAndMalformedValues) {
  EXPECT_THAT(open_error(gguf_bytes({{"k", 13, "abcd"}}, {}, "")),
              HasSubstr("metadata key 'k': unknown value type 13"));
  EXPECT_THAT(open_error(gguf_bytes({{"k", 9, u32_bytes(77) + u64_bytes(0)}}, {}, "")),
              HasSubstr("unknown array element type 77"));
  EXPECT_THAT(open_error(gguf_bytes({{"k", 9, u32_bytes(9) + u64_bytes(0)}}, {}, "")),
              HasSubstr("arrays of arrays are not supported"));
  EXPECT_THAT(open_error(gguf_bytes({{"k", 7, "\x02"}}, {}, "")), HasSubstr("boolean byte 2 is neither 0 nor 1"));
  EXPECT_THAT(open_error(gguf_bytes({kv_u32("k", 1), kv_u32("k", 2)}, {}, "")),
              HasSubstr("metadata key 'k': appears twice"));
  EXPECT_THAT(open_error(gguf_bytes({kv_u32("general.alignment", 24)}, {}, "")),
              HasSubstr("metadata key 'general.alignment': 24 is not a power of two"));
  EXPECT_THAT(open_error(gguf_bytes({kv_f32("general.alignment", 32)}, {}, "")), HasSubstr("must be a uint32"));
}

TEST(GgufReader, RefusesOffsetsOutsideTheFileOverlapsAndMisalignment) {
  EXPECT_THAT(open_error(two_tensors(1ull << 40)),
              HasSubstr("tensor 'b': data [1099511627776, 1099511627792) runs past"));
  EXPECT_THAT(open_error(two_tensors(~0ull - 31)), HasSubstr("tensor 'b'"));
  EXPECT_THAT(open_error(two_tensors(0)), HasSubstr("tensors: 'a' [0, 24) and 'b' [0, 16) overlap"));
  EXPECT_THAT(open_error(two_tensors(16)), HasSubstr("tensor 'b': offset 16 is not a multiple of the alignment 32"));
  const std::string twice = gguf_bytes({}, {{"a", {2}, f32_type, 0}, {"a", {2}, f32_type, 32}}, std::string(64, '\0'));
  EXPECT_THAT(open_error(twice), HasSubstr("tensor 'a': appears twice"));
}

TEST(GgufReader, RefusesUnknownTypesBadBlocksAndOverflowingShapes) {
  EXPECT_THAT(open_error(two_tensors(32, 99)), HasSubstr("tensor 'b': unknown type 99"));
  EXPECT_THAT(open_error(two_tensors(32, 18)),
              HasSubstr("tensor 'b': unsupported type IQ3_XXS (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                        "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)"));
  EXPECT_THAT(open_error(gguf_bytes({}, {{"q", {33, 2}, q8_0_type, 0}}, std::string(96, '\0'))),
              HasSubstr("tensor 'q': row length 33 is not a multiple of the Q8_0 block of 32"));
  EXPECT_THAT(open_error(gguf_bytes({}, {{"big", {1ull << 40, 1ull << 40}, f32_type, 0}}, "")),
              HasSubstr("tensor 'big': shape [1099511627776, 1099511627776] has too many elements (overflow)"));
  EXPECT_THAT(open_error(gguf_bytes({}, {{"huge", {1ull << 59}, f32_type, 0}}, "")),
              HasSubstr("tensor 'huge': data [0, 2305843009213693952) runs past the end of the file"));
  EXPECT_THAT(open_error(gguf_bytes({}, {{"deep", {1, 1, 1, 1, 1}, f32_type, 0}}, std::string(32, '\0'))),
              HasSubstr("tensor 'deep': 5 dimensions (at most 4)"));
}

TEST(GgufReader, NamesTheFileWhenItIsEmptyOrMissing) {
  EXPECT_THAT(open_error(""), HasSubstr("m.gguf"));
  EXPECT_THAT(error_of([] { gguf_file file("/nonexistent/x.gguf"); }), HasSubstr("x.gguf"));
}

TEST(GgufReader, RecognisesGgufPathsByExtensionOrMagic) {
  temp_dir dir;
  write_file(dir / "model.bin", two_tensors());
  write_file(dir / "other.bin", "not gguf");
  EXPECT_TRUE(is_gguf_path(dir / "model.bin"));
  EXPECT_FALSE(is_gguf_path(dir / "other.bin"));
  EXPECT_FALSE(is_gguf_path(dir.path()));
  EXPECT_FALSE(is_gguf_path(dir / "absent.gguf"));
}

}  // namespace
}  // namespace troupe
