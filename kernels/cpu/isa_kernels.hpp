#pragma once
// The table of ISA-specific kernels. One instance per dispatch level, each
// compiled in its own translation unit with that level's -m flags
// (isa_scalar.cpp, isa_avx2.cpp, isa_avx512.cpp, isa_avx512bf16.cpp).
//
// Rule for those translation units: they include only this header,
// simd.hpp, the *_impl.hpp files, <cstddef>, <cstdint> and <immintrin.h>.
// Any inline function from another header (the standard library included)
// compiled with AVX-512 flags could be picked by the linker for the whole
// program and fault on an older CPU; so this header holds only plain types
// and declarations.

#include <cstddef>
#include <cstdint>

namespace troupe::cpu {

/// Element type codes shared with the ISA units (values of troupe::dtype).
enum class elem : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2 };

/// out[m, n] = x[m, :] · w[n, :] (+ bias[n]) for m < m_rows, n in [n_begin, n_end).
struct gemv_args {
  const void* weights = nullptr;  ///< [N][k] row-major, element type `weight_type`
  elem weight_type = elem::f32;
  std::int64_t k = 0;           ///< in_features
  const float* bias = nullptr;  ///< [N] or null
  const float* x = nullptr;     ///< [m_rows][k], row stride x_stride (floats)
  std::int64_t x_stride = 0;
  const std::uint16_t* x_bf16 = nullptr;  ///< [m_rows][k] bf16 copy of x (dot-bf16 path only)
  std::int64_t x_bf16_stride = 0;         ///< elements between rows of x_bf16
  std::int64_t m_rows = 0;
  float* out = nullptr;  ///< [m_rows][N], row stride out_stride (floats)
  std::int64_t out_stride = 0;
  std::int64_t n_begin = 0, n_end = 0;
  /// > 0: walk K in blocks of this many elements (a multiple of 32), each
  /// block's activation slice kept in L1 while the weight tiles pass over
  /// it; every output element still accumulates over K in the same order as
  /// with 0 (one pass over all of K per tile), so the two agree bit for bit.
  std::int64_t k_block = 0;
  float* accumulators = nullptr;  ///< gemv_accumulator_floats() floats of scratch when k_block > 0
};

/// Scratch floats a K-blocked gemv (gemv_args::k_block > 0) needs for `n`
/// weight rows: one vector of partial sums per (activation row of a pass, weight row).
inline std::size_t gemv_accumulator_floats(std::int64_t n) { return static_cast<std::size_t>(n) * 8 * 16; }

/// bf16 weights in output panels (cpu_backend_options::bf16_panels): panel p
/// holds weight rows [64 p, 64 p + 64) as [k_pairs][64][2] bf16, element
/// (row r, input c) at panel p + (c / 2) * 128 + (r % 64) * 2 + c % 2. So one
/// 64-byte vector carries inputs 2 j and 2 j + 1 of 16 rows, the even ones
/// as the low halves of its 32-bit lanes. Rows past out_features and the
/// odd half past an odd in_features are zero.
constexpr std::int64_t bf16_panel_rows = 64;

/// out[m, n] = x[m, :] · w[n, :] (+ bias[n]) for m < m_rows and the rows n
/// of panels [panel_begin, panel_end) below n_rows, w in bf16 panels. Each
/// output accumulates over the inputs in order from zero, then adds its
/// bias: one f32 fma per input, or with bf16 arithmetic (isa_kernels::bf16_dot)
/// one vdpbf16ps per input pair of x rounded to bf16. So it is the same bits
/// whatever m_rows, the row's place in it, or how the panels and rows are
/// split into calls.
struct panel_gemm_args {
  const std::uint16_t* panels = nullptr;  ///< the weight's panels (layout above)
  std::int64_t k = 0;                     ///< in_features
  std::int64_t n_rows = 0;                ///< out_features: outputs at or past it are not written
  const float* bias = nullptr;            ///< [n_rows] or null
  const float* x = nullptr;               ///< [m_rows][k], row stride x_stride (floats)
  std::int64_t x_stride = 0;
  /// [m_rows][k] bf16 copy of x, read instead of x where isa_kernels::bf16_dot.
  const std::uint16_t* x_bf16 = nullptr;
  std::int64_t x_bf16_stride = 0;  ///< elements between rows of x_bf16 (even)
  std::int64_t m_rows = 0;
  float* out = nullptr;  ///< [m_rows][n_rows], row stride out_stride (floats); holds partial sums between K blocks
  std::int64_t out_stride = 0;
  std::int64_t panel_begin = 0, panel_end = 0;
};

/// Weight-only quantised formats (values of troupe::weight_quantization, kernels/quantized.hpp).
enum class qformat : std::uint8_t {
  int8 = 1,
  int4 = 2,
  int4_asym = 3,
  int5_asym = 4,
  int4_nl = 5,
  int6 = 6,
  int4_g16 = 7
};

/// int4_nl's levels (troupe::int4_nl_levels) + 128: the byte an int4_nl code
/// becomes in int8's layout (q + 128), so that once looked up its vectors
/// take int8's dot products.
constexpr std::uint8_t int4_nl_biased_levels[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                    129, 141, 153, 166, 181, 197, 217, 241};

/// Weights in a superblock of this many input features share one layout
/// unit; in_features are zero-padded to a multiple of it.
constexpr std::int64_t quant_superblock = 512;
/// Input features per quantisation group (int4 weights, int8 activations).
constexpr std::int64_t quant_group = 32;

/// Bytes of expanded codes a thread's scratch holds for the GEMM tiles: a
/// block of weight rows at a time (qgemv_args::code_scratch).
constexpr std::int64_t quant_code_scratch_bytes = std::int64_t{256} << 10;
/// The whole scratch: the codes, then the block's group scales and offsets
/// in f32 (8 bytes per 32 codes at most).
constexpr std::int64_t quant_tile_scratch_bytes = quant_code_scratch_bytes + quant_code_scratch_bytes / 4;

/// A quantised [rows][cols] weight matrix (layout: kernels/cpu/README.md).
/// Within a superblock of 16 groups, byte p (p < 512) of the interleaved
/// order holds input feature 32 * ((p % 64) / 4) + 4 * (p / 64) + p % 4, so
/// 32-bit lane j of each 64-byte vector belongs to group j.
struct quantized_matrix {
  qformat format = qformat::int8;
  std::int64_t rows = 0, cols = 0;
  std::int64_t padded_cols = 0;  ///< cols rounded up to quant_superblock
  /// int8: [rows][padded_cols] bytes q + 128 in interleaved order. int4:
  /// [rows][padded_cols / 2]; byte b of a superblock's 256 holds interleaved
  /// position b in its low nibble and position b + 256 in its high one
  /// (int4_nl and int4_g16 alike).
  /// int5_asym: [rows][padded_cols / 512 · 320]; each superblock's 256
  /// nibble bytes as int4 (the codes' low four bits), then 64 bytes whose
  /// bit p % 8 of byte p / 8 is the fifth bit (16) of interleaved position p.
  /// int6: [rows][padded_cols / 512 · 384]; the 256 nibble bytes as int4,
  /// then 128 bytes whose bits 2 (p / 128) and 2 (p / 128) + 1 of byte p %
  /// 128 are the codes' fifth and sixth bits (16, 32) at position p, so
  /// that vector r takes them from the plane's vector r % 2, shifted by r / 2.
  const std::uint8_t* codes = nullptr;
  const float* row_scales = nullptr;             ///< int8: [rows], w = scale * (code - 128)
  /// int4, int4_asym, int5_asym, int4_nl: f16 [rows][padded_cols / 32];
  /// int4_nl: w = scale * int4_nl_levels[code]
  const std::uint16_t* group_scales = nullptr;
  const std::uint16_t* group_offsets = nullptr;  ///< int4_asym, int5_asym: f16 [rows][groups], w = scale * code + offset;
                                                 ///< null for int4: offset = -8 * scale
  /// Block-factored scales, read instead of group_scales (and
  /// group_offsets) where set: group g's scale is block_scales[g / 8] ·
  /// scale_codes[g] and its offset block_offsets[g / 8] · offset_codes[g],
  /// the products in f32 (exact). f16 [rows][padded_cols / 256] per block
  /// of 8 groups; codes [rows][groups], u8 for int4_asym / int5_asym (GGUF
  /// Q4_K / Q5_K kept exactly), s8 (two's complement) for int4 and int4_nl
  /// (symmetric scales of either sign: int4 quantised at load, GGUF IQ4_XS),
  /// which hold no offsets (block_offsets and offset_codes null).
  /// int6 and int4_g16 (always block-factored, w = scale · (code − 32), or
  /// − 8) have a scale per half group: s8 codes [rows][padded_cols / 16], per
  /// superblock the 16 groups' first halves (inputs 32 j .. 32 j + 15:
  /// vectors 0-3 of the layout) then their second halves (vectors 4-7)
  /// (half_scale_code_index).
  const std::uint16_t* block_scales = nullptr;
  const std::uint16_t* block_offsets = nullptr;
  const std::uint8_t* scale_codes = nullptr;
  const std::uint8_t* offset_codes = nullptr;
};

/// Groups per block of block-factored scales (quantized_matrix::block_scales).
constexpr std::int64_t groups_per_factor_block = 8;

/// True where a block-factored matrix's scale codes are signed bytes
/// (quantized_matrix::scale_codes): the formats without group offsets.
constexpr bool signed_scale_codes(qformat format) {
  return format == qformat::int4 || format == qformat::int4_nl || format == qformat::int6 ||
         format == qformat::int4_g16;
}

/// True for the formats with a scale per half group of 16 inputs (int6,
/// int4_g16): a group's integer dot product is two, over vectors 0-3 and 4-7.
constexpr bool half_group_scales(qformat format) { return format == qformat::int6 || format == qformat::int4_g16; }

/// The code of a zero weight in a half-group format (w = scale · (code −
/// this)): 32 for int6, 8 for int4_g16 (troupe::half_group_code_offset).
constexpr int half_group_zero_code(qformat format) { return format == qformat::int6 ? 32 : 8; }

/// Index in an int6 or int4_g16 matrix's scale_codes of half `half` (0:
/// inputs 0-15) of group g (counted over the matrix).
constexpr std::int64_t half_scale_code_index(std::int64_t g, int half) { return 2 * g - g % 16 + 16 * half; }

/// Activation rows quantised to int8 per group of 32 (symmetric), in the
/// same interleaved order as the weights: x ≈ scale[g] * code.
struct quantized_rows {
  const std::int8_t* codes = nullptr;  ///< [m][padded_cols]
  const float* scales = nullptr;       ///< [m][groups]
  const float* sums = nullptr;         ///< [m][groups]: scale[g] * Σ codes of group g
  /// [m][groups]: Σ codes of group g. The kernels start each group's integer
  /// dot product at −c · Σ codes, which takes out a weight code offset c
  /// (int8's + 128, int4's 8) exactly before anything is rounded.
  const std::int32_t* code_sums = nullptr;
  /// [m][2][groups]: where int6's two integer sums of group g start, −32 ·
  /// Σ codes of its first 16 inputs (at g) and of its last 16 (at groups +
  /// g), so that its code offset 32 comes out of each half's dot product.
  /// int4_g16's sums start at a quarter of these (its code offset 8; an
  /// arithmetic shift, exact).
  const std::int32_t* half_starts = nullptr;
  std::int64_t padded_cols = 0;
};

/// out[m, n] = Σ_k x[m, k] · w[n, k] (+ bias[n]) for m < m_rows, n in [n_begin, n_end).
struct qgemv_args {
  const quantized_matrix* weights = nullptr;
  const quantized_rows* x = nullptr;
  const float* bias = nullptr;  ///< [rows] or null
  std::int64_t m_rows = 0;
  float* out = nullptr;
  std::int64_t out_stride = 0;
  std::int64_t n_begin = 0, n_end = 0;
  /// Room for quant_tile_scratch_bytes (this thread's, 64-byte aligned) in
  /// which the GEMM tiles expand a block of 4- or 5-bit codes to bytes (and
  /// their group scales to f32) once for all their activation rows; null:
  /// each tile unpacks the codes it reads (the same bits either way).
  std::uint8_t* code_scratch = nullptr;
};

/// One attention work item: every q head of `num_queries` consecutive tokens
/// of one sequence against the sequence's cached tokens [kv_begin, kv_end).
/// Rows are (token, q head), q head = kv head * group + g. The context is
/// walked in chunks of `chunk_tokens` that start at positions multiple of
/// it; each chunk's online softmax starts afresh, and the chunks' states are
/// merged in position order by one rule (attention_merge's), so a query's
/// output is the same bits whether its chunks ran in one item or as
/// separate items merged afterwards.
struct attention_args {
  int head_dim = 0;
  int group = 1;  ///< q heads per kv head
  int block_size = 0;
  float scale = 1.0f;
  elem cache_type = elem::f32;
  const void* cache = nullptr;              ///< pool base
  std::int64_t block_elements = 0;          ///< elements per block (all layers)
  std::int64_t layer_offset = 0;            ///< element offset of this layer's K tile in a block
  std::int64_t tile_elements = 0;           ///< V tile follows K tile by this many elements
  int kv_heads = 0;                         ///< kv heads, all processed by the item
  const std::int32_t* pages = nullptr;      ///< the sequence's block ids, in order
  std::int64_t kv_begin = 0, kv_end = 0;    ///< token range; kv_begin is a multiple of chunk_tokens
  std::int64_t chunk_tokens = 0;            ///< a multiple of block_size; with out null, kv range is one chunk
  const float* q = nullptr;                 ///< row of the first query token; head h at + h * head_dim
  std::int64_t q_stride = 0;                ///< floats between query tokens
  const std::int32_t* positions = nullptr;  ///< [num_queries] positions of the query tokens
  int num_queries = 0;
  /// [num_queries] or null (all causal): query t's keys at positions >=
  /// tree_start[t] are not the cache's own but those at cache positions
  /// tree_keys[tree_key_offset[t] + position - tree_start[t]] (its draft tree path).
  const std::int32_t* tree_start = nullptr;
  const std::int32_t* tree_key_offset = nullptr;  ///< [num_queries] into tree_keys
  const std::int32_t* tree_keys = nullptr;        ///< remapped cache positions of every tree query
  float* out = nullptr;                           ///< final output row of the first token, or null when partial
  std::int64_t out_stride = 0;
  float* partial_o = nullptr;  ///< [rows][head_dim] unnormalised output when out is null
  float* partial_m = nullptr;  ///< [rows] running max
  float* partial_l = nullptr;  ///< [rows] softmax denominator
  float* scratch = nullptr;    ///< attention_scratch_floats() floats
};

/// 32-bit words of one tile's keys in dimension pairs: 16-key groups
/// (attention_pairs_impl.hpp).
inline std::int64_t paired_key_words(int block_size, int head_dim) {
  return (std::int64_t{block_size} + 15) / 16 * 16 * ((head_dim + 1) / 2);
}

/// 32-bit words of one query row in dimension pairs, padded to whole vectors
/// (attention_pairs_impl.hpp).
inline std::int64_t paired_query_words(int head_dim) { return ((std::int64_t{head_dim} + 1) / 2 + 15) / 16 * 16; }

/// Scratch floats one attention work item needs; rows = num_queries * q heads.
inline std::size_t attention_scratch_floats(std::int64_t rows, int head_dim, int block_size) {
  const auto r = static_cast<std::size_t>(rows), d = static_cast<std::size_t>(head_dim),
             b = static_cast<std::size_t>(block_size);
  // Chunk and merged softmax states, 8 score rows of up to 16-wide padding, K/V tiles, a tree query's tiles,
  // the paired keys of a tile and of a tree query's, that query's keys as bf16, the rows' paired queries.
  return 2 * (r * d + 2 * r) + 8 * (b + 32) + 4 * b * d + 64 +
         2 * static_cast<std::size_t>(paired_key_words(block_size, head_dim)) + (b * d + 1) / 2 +
         r * static_cast<std::size_t>(paired_query_words(head_dim));
}

/// Rows of a split attention run whose chunks ran as separate items: row r
/// of chunk c has its unnormalised output at partial_o + (c * rows + r) *
/// head_dim, its max and sum at partial_m/l[c * rows + r]. Row r's result
/// goes to out + (r / q_heads) * out_stride + (r % q_heads) * head_dim.
struct attention_merge_args {
  int head_dim = 0;
  int q_heads = 0;
  int chunks = 0;
  std::int64_t rows = 0;
  const float* partial_o = nullptr;
  const float* partial_m = nullptr;
  const float* partial_l = nullptr;
  float* out = nullptr;
  std::int64_t out_stride = 0;
  float* scratch = nullptr;  ///< head_dim floats
};

/// Kernels of one dispatch level. Rows are contiguous float arrays unless noted.
struct isa_kernels {
  const char* name;
  /// True when bf16 weights want gemv_args::x_bf16 and panel_gemm_args::x_bf16
  /// (the vdpbf16ps paths).
  bool bf16_dot;
  void (*gemv)(const gemv_args& args);
  /// bf16 weights in panels (panel_gemm_args); null at levels without it,
  /// where bf16 weights stay row-major for gemv and oneDNN.
  void (*bf16_panel_gemm)(const panel_gemm_args& args);
  /// dst[i] = type(src[i]) with round-to-nearest-even.
  void (*from_f32)(const float* src, void* dst, elem type, std::int64_t count);
  /// dst[i] = float(src[i]), exact.
  void (*to_f32)(const void* src, elem type, float* dst, std::int64_t count);
  /// out = weight * (x * rsqrt(mean(x²) + eps)) over one row of n.
  void (*rms_norm_row)(const float* x, const float* weight, float eps, std::int64_t n, float* out);
  /// residual += x, then out = rms_norm(residual).
  void (*add_rms_norm_row)(float* residual, const float* x, const float* weight, float eps, std::int64_t n, float* out);
  /// out = silu(gate) * up over n.
  void (*silu_mul_row)(const float* gate, const float* up, std::int64_t n, float* out);
  /// Rotates `heads` heads of one token in place: pairs (i, i + rot/2), i < rot/2,
  /// of each head (head h at x + h * head_dim), using cos/sin [rot/2].
  void (*rope_row)(float* x, int heads, int head_dim, int rot_dim, const float* cos, const float* sin);
  /// Runs one attention work item.
  void (*attention)(const attention_args& args);
  /// Merges the chunks of split attention rows into their outputs.
  void (*attention_merge)(const attention_merge_args& args);
  /// Quantised GEMV/small-batch GEMM (int8 activations × int8/int4 weights).
  void (*qgemv)(const qgemv_args& args);
  /// Quantises one activation row x[0..cols), zero-padded to padded_cols:
  /// codes [padded_cols] in interleaved order, scales, sums and code_sums
  /// [padded_cols / 32], half_starts [2][padded_cols / 32] (quantized_rows).
  void (*quantize_row)(const float* x, std::int64_t cols, std::int64_t padded_cols, std::int8_t* codes, float* scales,
                       float* sums, std::int32_t* code_sums, std::int32_t* half_starts);
  /// Weight rows [row_begin, row_end) of `w` as bf16 in natural order:
  /// [row_end - row_begin][w.cols] at `out` (the prefill GEMM's panels).
  void (*dequantize_rows)(const quantized_matrix& w, std::int64_t row_begin, std::int64_t row_end, std::uint16_t* out);
  /// max(x[0..n)); -inf for n == 0.
  float (*row_max)(const float* x, std::int64_t n);
  /// Σ exp(x[i] - shift), accumulated in double.
  double (*sum_exp)(const float* x, std::int64_t n, float shift);
  /// out[i] = exp(x[i] * scale - shift).
  void (*exp_scaled)(const float* x, std::int64_t n, float scale, float shift, float* out);
};

const isa_kernels& isa_kernels_scalar();
const isa_kernels& isa_kernels_avx2();
const isa_kernels& isa_kernels_avx512();
const isa_kernels& isa_kernels_avx512_vnni();
const isa_kernels& isa_kernels_avx512_bf16();

}  // namespace troupe::cpu
