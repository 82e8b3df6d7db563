#pragma once
// GGUF matrices whose blocks already are troupe's int4 / int5 / int6 /
// int4_g16 groups, served to the backend in that form
// (kernels/stored_code_source.hpp) rather than expanded:
//   Q4_0 (f16 d, 32 codes q): x = d · (q − 8)  -> int4, scale d;
//   Q4_1 (f16 d, f16 m, 32 codes q): x = d · q + m  -> int4_asym, scale d, offset m;
//   Q4_K (256 weights: f16 d and dmin, eight sub-blocks of 32 with 6-bit
//   scale s and min m): x = d·s · q − dmin·m  -> int4_asym, one group a
//   sub-block, scale d·s and offset −dmin·m;
//   Q5_0 / Q5_1 / Q5_K: as Q4_0 / Q4_1 / Q4_K with 5-bit codes  -> int5_asym
//   (Q5_0's offset −16 d);
//   IQ4_NL (f16 d, 32 codes naming 16 int8 levels): x = d · level[q]  -> int4_nl;
//   IQ4_XS (256 weights: f16 d, eight sub-blocks of 32 with 6-bit scale s):
//   x = d · (s − 32) · level[q]  -> int4_nl, one group a sub-block;
//   Q6_K (256 weights: f16 d, sixteen sub-blocks of 16 with int8 scale s,
//   6-bit codes q): x = d·s · (q − 32)  -> int6, d and s as its block
//   factors (read_codes and read_block_factors only);
//   Q3_K (256 weights: f16 d, sixteen sub-blocks of 16 with 6-bit scale s,
//   3-bit values q in −4..3): x = d·(s − 32) · q  -> int4_g16, code q + 8,
//   d and s − 32 as its block factors (as Q6_K's).
// Q4_0 / Q4_1 / Q5_1 / IQ4_NL codes and scales are copied bit for bit, and
// Q5_0's offset is exact, so the weights are exactly the file's. The K
// formats', IQ4_XS's, Q6_K's and Q3_K's codes and block factors are too;
// read_rows rounds the 4- and 5-bit formats' products once to f16
// (relative error at most 2^-11, far inside the 4-bit step).

#include <cstdint>
#include <memory>
#include <optional>

#include "kernels/stored_code_source.hpp"
#include "model/gguf.hpp"

namespace troupe {

/// The format whose groups `type`'s blocks are: int4 for Q4_0, int4_asym
/// for Q4_1 and Q4_K, int5_asym for Q5_0, Q5_1 and Q5_K, int4_nl for IQ4_NL
/// and IQ4_XS, int6 for Q6_K, int4_g16 for Q3_K, nullopt for every other
/// type.
std::optional<weight_quantization> gguf_stored_code_format(ggml_type type);

/// A reader of the 2-D Q4_0 / Q4_1 / Q4_K / Q5_0 / Q5_1 / Q5_K / IQ4_NL /
/// IQ4_XS / Q6_K / Q3_K `tensor` (rows in HF order, see gguf_rows for
/// `rope_heads`). The tensor's mapping must outlive it. Throws
/// std::runtime_error naming the tensor for another type or shape;
/// read_rows throws one for a block whose scale or offset is beyond f16's
/// range (Q4_K, Q5_K, Q5_0, IQ4_XS), and std::logic_error for Q6_K and
/// Q3_K, whose scales per 16 inputs it cannot hold.
std::shared_ptr<const stored_code_source> gguf_stored_code_source(const gguf_tensor& tensor, std::int64_t rope_heads);

}  // namespace troupe
