#pragma once
// Helpers of the tests of GGUF sources kept with a scale per 16 inputs
// (Q6_K as int6, Q3_K as int4_g16): the gguf package's reference blocks
// (tests/fixtures/gguf/quant_blocks.json) as a matrix, and a source's
// decoded rows against the file's own expansion.

#include <gtest/gtest.h>

#include <bit>
#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/row_source.hpp"
#include "kernels/stored_code_source.hpp"
#include "model/gguf.hpp"
#include "model/gguf_model.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe::testing {

/// quant_blocks.json's entry for one block type: its blocks' bytes and the
/// floats gguf.quants.dequantize gives them.
struct reference_blocks {
  std::vector<std::byte> bytes;
  std::vector<float> values;
};

/// The entry named `type_name` ("Q6_K", "Q3_K", ...).
inline reference_blocks quant_block_reference(const std::string& type_name) {
  const std::filesystem::path file = std::filesystem::path(TROUPE_FIXTURES_DIR) / "gguf" / "quant_blocks.json";
  const auto blocks = boost::json::parse(read_file(file)).as_object();
  const auto& entry = blocks.at(type_name).as_object();
  const std::string hex(entry.at("hex").as_string());
  reference_blocks out;
  for (std::size_t i = 0; i < hex.size(); i += 2)
    out.bytes.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  for (const boost::json::value& value : entry.at("values").as_array())
    out.values.push_back(static_cast<float>(value.to_number<double>()));
  return out;
}

/// `blocks` (of `block_bytes` each) as a [rows][256] matrix of `type`, one block a row.
inline gguf_tensor one_block_rows(ggml_type type, std::size_t block_bytes, const std::vector<std::byte>& blocks) {
  const std::uint64_t rows = blocks.size() / block_bytes;
  return {"blk.0.attn_v.weight", type, {256, rows}, 0, blocks.size(), blocks.data()};
}

/// What a source with a scale per 16 inputs reads for rows [0, rows) of
/// one block each: codes [rows][256], the f16 factor of each row and its 16
/// scale codes [rows][16].
struct half_group_rows {
  std::vector<std::uint8_t> codes, scale_codes;
  std::vector<std::uint16_t> block_scales;
};

/// Reads rows [0, rows) of `source`, checking that it is a `format`
/// source of block factors in input order and that it leaves the offset
/// arguments as they were (no part of a format with a scale per 16).
inline half_group_rows read_one_block_rows(const stored_code_source& source, weight_quantization format,
                                           std::int64_t rows) {
  EXPECT_EQ(source.format(), format);
  EXPECT_TRUE(source.has_block_factors());
  EXPECT_TRUE(source.input_permutation().empty());
  half_group_rows out{std::vector<std::uint8_t>(static_cast<std::size_t>(rows * 256)),
                      std::vector<std::uint8_t>(static_cast<std::size_t>(rows * 16)),
                      std::vector<std::uint16_t>(static_cast<std::size_t>(rows))};
  std::vector<std::uint16_t> block_offsets(out.block_scales.size(), 0xabcd);
  std::vector<std::uint8_t> offset_codes(out.scale_codes.size(), 0x5a);
  source.read_codes(0, rows, out.codes.data());
  source.read_block_factors(0, rows, out.block_scales.data(), block_offsets.data(), out.scale_codes.data(),
                            offset_codes.data());
  EXPECT_EQ(block_offsets, std::vector<std::uint16_t>(out.block_scales.size(), 0xabcd));
  EXPECT_EQ(offset_codes, std::vector<std::uint8_t>(out.scale_codes.size(), 0x5a));
  return out;
}

/// Rows [0, rows) of `source` decoded bit for bit as gguf_row_source expands `tensor`.
inline void expect_decoded_like_the_expansion(const stored_code_source& source, const gguf_tensor& tensor,
                                              std::int64_t rope_heads) {
  const auto cols = static_cast<std::int64_t>(tensor.dims[0]), rows = static_cast<std::int64_t>(tensor.dims[1]);
  std::vector<float> decoded(static_cast<std::size_t>(rows * cols)), expanded(decoded.size());
  decode_stored_code_rows(source, 0, rows, cols, decoded.data());
  gguf_row_source(tensor, rope_heads)->read_rows(0, rows, expanded.data());
  for (std::size_t i = 0; i < decoded.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(decoded[i]), std::bit_cast<std::uint32_t>(expanded[i]))
        << tensor.name << " [" << i / static_cast<std::size_t>(cols) << ", " << i % static_cast<std::size_t>(cols)
        << "]: " << decoded[i] << " against " << expanded[i];
}

}  // namespace troupe::testing
