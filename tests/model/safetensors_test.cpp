// The safetensors reader against files written by the reference library and
// against hostile files built byte by byte.

#include "model/safetensors.hpp"

#include <boost/json.hpp>
#include <cstring>

#include "model/safetensors_writer.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::raw_safetensors;
using testing::temp_dir;
using testing::write_file;

float element_as_float(const host_tensor& tensor, std::size_t i) {
  float value = 0.0f;
  if (tensor.type == dtype::f32) {
    std::memcpy(&value, static_cast<const char*>(tensor.data) + 4 * i, 4);
    return value;
  }
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const char*>(tensor.data) + 2 * i, 2);
  return tensor.type == dtype::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
}

TEST(Safetensors, ReadsEveryTensorTheReferenceLibraryWrote) {
  const safetensors_file file(std::filesystem::path(TROUPE_FIXTURES_DIR) / "model/reference.safetensors");
  const boost::json::value expected = boost::json::parse(
      testing::read_file(std::filesystem::path(TROUPE_FIXTURES_DIR) / "model/reference_values.json"));
  ASSERT_EQ(file.tensors().size(), expected.as_object().size());
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "written by safetensors");
  for (const auto& [name, entry] : expected.as_object()) {
    const host_tensor* tensor = file.find(std::string(name));
    ASSERT_NE(tensor, nullptr) << name;
    std::vector<std::int64_t> shape;
    for (const auto& dim : entry.at("shape").as_array()) shape.push_back(dim.to_number<std::int64_t>());
    EXPECT_EQ(tensor->shape, shape) << name;
    const auto& values = entry.at("values").as_array();
    ASSERT_EQ(static_cast<std::size_t>(tensor->numel()), values.size()) << name;
    for (std::size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(element_as_float(*tensor, i), values[i].to_number<float>()) << name << "[" << i << "]";
    }
  }
  EXPECT_EQ(file.find("bf16.matrix")->type, dtype::bf16);
  EXPECT_EQ(file.find("f16.vector")->type, dtype::f16);
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(Safetensors, WriterOutputReadsBackWithPaddedHeaderAndAlignedData) {
  temp_dir dir;
  const std::vector<safetensors_entry> entries = {
      {"a", dtype::f32, {2, 3}}, {"b", dtype::bf16, {5}}, {"c", dtype::f16, {1, 1, 2}}};
  const auto fill = [](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>((index * 31 + offset + i) & 0xff);
  };
  write_safetensors(dir / "w.safetensors", entries, {{"format", "pt"}}, fill);
  const safetensors_file file(dir / "w.safetensors");
  const std::string bytes = testing::read_file(dir / "w.safetensors");
  std::uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i)
    header_length = (header_length << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  EXPECT_EQ(header_length % 8, 0u);
  ASSERT_EQ(file.tensors().size(), 3u);
  std::size_t data_offset = 0;
  for (std::size_t index = 0; index < entries.size(); ++index) {
    const host_tensor* tensor = file.find(entries[index].name);
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(tensor->shape, entries[index].shape);
    EXPECT_EQ(tensor->type, entries[index].type);
    for (std::size_t i = 0; i < tensor->byte_size(); ++i) {
      EXPECT_EQ(static_cast<const unsigned char*>(tensor->data)[i], (index * 31 + i) & 0xff);
    }
    // Zero-copy: the view holds the same bytes as the file at its offset.
    EXPECT_EQ(std::memcmp(tensor->data, bytes.data() + 8 + header_length + data_offset, tensor->byte_size()), 0);
    data_offset += tensor->byte_size();
  }
}

TEST(Safetensors, MisalignedDataIsCopiedToAlignedMemory) {
  temp_dir dir;
  // A 2-byte header pad leaves the f32 data at an offset that is not a multiple of 4.
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8 + 2, ' ');
  const float values[2] = {1.5f, -2.25f};
  write_file(dir / "m.safetensors",
             raw_safetensors(padded, std::string_view(reinterpret_cast<const char*>(values), 8)));
  const safetensors_file file(dir / "m.safetensors");
  const host_tensor* x = file.find("x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x->data) % 4, 0u);
  EXPECT_EQ(element_as_float(*x, 0), 1.5f);
  EXPECT_EQ(element_as_float(*x, 1), -2.25f);
}

TEST(Safetensors, Int32TensorsAreKeptApartForPackedQuantisedWeights) {
  temp_dir dir;
  const std::string header = R"({"w.qweight":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
                             R"("w.scales":{"dtype":"F16","shape":[2],"data_offsets":[8,12]}})";
  const std::int32_t words[2] = {-1, 0x12345678};
  const std::uint16_t halves[2] = {0x3c00, 0xc000};
  std::string data(reinterpret_cast<const char*>(words), 8);
  data.append(reinterpret_cast<const char*>(halves), 4);
  write_file(dir / "m.safetensors", raw_safetensors(header, data));
  const safetensors_file file(dir / "m.safetensors");
  EXPECT_EQ(file.find("w.qweight"), nullptr);
  ASSERT_EQ(file.tensors().size(), 1u);
  ASSERT_EQ(file.int32_tensors().size(), 1u);
  const int32_tensor* qweight = file.find_int32("w.qweight");
  ASSERT_NE(qweight, nullptr);
  EXPECT_EQ(qweight->shape, std::vector<std::int64_t>{2});
  EXPECT_EQ(qweight->data[0], -1);
  EXPECT_EQ(qweight->data[1], 0x12345678);
  EXPECT_EQ(file.find_int32("w.scales"), nullptr);
}

// Opens a file with `bytes` and returns the error text.
std::string open_error(std::string_view bytes) {
  temp_dir dir;
  write_file(dir / "model.safetensors", bytes);
  return error_of([&] { safetensors_file file(dir / "model.safetensors"); });
}

const std::string sixteen_bytes(16, '\0');

TEST(SafetensorsHostile, TruncatedFile) {
  EXPECT_EQ(open_error(std::string(5, '\x10')),
            "model.safetensors: file is 5 bytes, too short to hold the 8-byte header length");
}

TEST(SafetensorsHostile, EmptyFile) { EXPECT_THAT(open_error(""), HasSubstr("file is empty")); }

TEST(SafetensorsHostile, HeaderLengthPastEndOfFile) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, "", 1000)),
            "model.safetensors: header length 1000 runs past the end of the file (" +
                std::to_string(8 + header.size()) + " bytes)");
}

TEST(SafetensorsHostile, AbsurdHeaderLength) {
  EXPECT_EQ(open_error(raw_safetensors("{}", "", 0xffffffffffffull)),
            "model.safetensors: header length 281474976710655 exceeds the limit of 100000000 bytes");
}

TEST(SafetensorsHostile, HeaderNotJson) {
  EXPECT_THAT(open_error(raw_safetensors("{\"a\": [1, 2", "")),
              HasSubstr("model.safetensors: header is not valid JSON"));
}

TEST(SafetensorsHostile, HeaderNotAnObject) {
  EXPECT_EQ(open_error(raw_safetensors("[1,2]", "")), "model.safetensors: header must be a JSON object, got array");
}

TEST(SafetensorsHostile, OverlappingDataOffsets) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)),
            "model.safetensors: tensors 'a' [0, 8) and 'b' [4, 12) overlap");
}

TEST(SafetensorsHostile, DataOffsetsPastTheData) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})";
  EXPECT_EQ(
      open_error(raw_safetensors(header, sixteen_bytes)),
      "model.safetensors: tensor 'a': data_offsets [0, 32) run past the end of the data (16 bytes after the header)");
}

TEST(SafetensorsHostile, DataOffsetsBeginAfterEnd) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[12,4]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)),
            "model.safetensors: tensor 'a': data_offsets [12, 4) begin after they end");
}

TEST(SafetensorsHostile, DataOffsetsMalformed) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)),
            "model.safetensors: tensor 'a': 'data_offsets' must be two non-negative integers [begin, end)");
}

TEST(SafetensorsHostile, ByteSizeDoesNotMatchShapeTimesDtype) {
  const std::string header = R"({"model.norm.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})";
  EXPECT_EQ(
      open_error(raw_safetensors(header, sixteen_bytes)),
      "model.safetensors: tensor 'model.norm.weight': data_offsets [0, 12) do not match shape [4] × F32 (16 bytes)");
}

TEST(SafetensorsHostile, Int32ByteSizeIsCheckedToo) {
  const std::string header = R"({"q.qzeros":{"dtype":"I32","shape":[3],"data_offsets":[0,16]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)),
            "model.safetensors: tensor 'q.qzeros': data_offsets [0, 16) do not match shape [3] × I32 (12 bytes)");
}

TEST(SafetensorsHostile, UnsupportedDtype) {
  const std::string header = R"({"q":{"dtype":"I8","shape":[16],"data_offsets":[0,16]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)),
            "model.safetensors: tensor 'q': unsupported dtype I8 (supported: BF16, F16, F32)");
}

TEST(SafetensorsHostile, UnknownDtype) {
  const std::string header = R"({"q":{"dtype":"Q9_K","shape":[16],"data_offsets":[0,16]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)), "model.safetensors: tensor 'q': unknown dtype 'Q9_K'");
}

TEST(SafetensorsHostile, NegativeDimension) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)),
            "model.safetensors: tensor 'a': shape has a negative dimension -4");
}

TEST(SafetensorsHostile, OverflowingShape) {
  // 2^32 × 2^32 elements wraps to 0 in 64 bits; it must not pass as an empty tensor.
  const std::string header = R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)),
            "model.safetensors: tensor 'a': shape has too many elements (overflow)");
}

TEST(SafetensorsHostile, ShapeOfWrongType) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)),
            "model.safetensors: tensor 'a': 'shape' must be a list of integers, found number");
}

TEST(SafetensorsHostile, MissingField) {
  const std::string header = R"({"a":{"shape":[4],"data_offsets":[0,16]}})";
  EXPECT_EQ(open_error(raw_safetensors(header, sixteen_bytes)), "model.safetensors: tensor 'a': missing 'dtype'");
}

TEST(SafetensorsHostile, EntryNotAnObject) {
  EXPECT_EQ(open_error(raw_safetensors(R"({"a":7})", sixteen_bytes)),
            "model.safetensors: tensor 'a': entry must be an object, got integer");
}

TEST(SafetensorsHostile, MetadataValueNotAString) {
  EXPECT_EQ(open_error(raw_safetensors(R"({"__metadata__":{"format":1}})", "")),
            "model.safetensors: '__metadata__' value of 'format' must be a string");
}

}  // namespace
}  // namespace troupe
