#include "kernels/cuda/gemm.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/convert.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace troupe::cuda {

namespace {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expression, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expression +
                           " failed: " + cublasLtGetStatusString(status));
}

#define TROUPE_CUBLAS_CHECK(expression)                                           \
  do {                                                                            \
    const cublasStatus_t troupe_cublas_status_ = (expression);                    \
    if (troupe_cublas_status_ != CUBLAS_STATUS_SUCCESS)                           \
      throw_cublas_error(troupe_cublas_status_, #expression, __FILE__, __LINE__); \
  } while (0)

cudaDataType_t cuda_type(dtype type) {
  switch (type) {
    case dtype::f32:
      return CUDA_R_32F;
    case dtype::f16:
      return CUDA_R_16F;
    case dtype::bf16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

// Largest power of two, up to 256, that divides the address.
std::uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  if (address == 0) return 256;
  const std::uintptr_t lowest_bit = address & (~address + 1);
  return lowest_bit >= 256 ? 256u : static_cast<std::uint32_t>(lowest_bit);
}

std::uint32_t problem_alignment(const gemm_problem& p) {
  std::uint32_t alignment = alignment_of(p.x);
  for (const void* pointer : {p.w, static_cast<const void*>(p.out), p.bias}) {
    const std::uint32_t a = alignment_of(pointer);
    if (a < alignment) alignment = a;
  }
  return alignment;
}

// Column-major layouts of the row-major problem: A = w (K × N, used
// transposed), B = x (K × M), C = D = out (N × M).
class matrix_layouts {
 public:
  matrix_layouts(const gemm_problem& p, std::int64_t m) {
    TROUPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, static_cast<std::uint64_t>(p.k),
                                                   static_cast<std::uint64_t>(p.n), p.k));
    TROUPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, static_cast<std::uint64_t>(p.k),
                                                   static_cast<std::uint64_t>(m), p.x_stride));
    TROUPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, cuda_type(p.out_type), static_cast<std::uint64_t>(p.n),
                                                   static_cast<std::uint64_t>(m), p.out_stride));
  }
  matrix_layouts(const matrix_layouts&) = delete;
  matrix_layouts& operator=(const matrix_layouts&) = delete;
  ~matrix_layouts() {
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
  }
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatrixLayout_t b = nullptr;
  cublasLtMatrixLayout_t c = nullptr;
};

class heuristic_preference {
 public:
  heuristic_preference(std::size_t workspace_bytes, std::uint32_t alignment) {
    TROUPE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    TROUPE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace_bytes, sizeof workspace_bytes));
    for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                           CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      TROUPE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof alignment));
    }
  }
  heuristic_preference(const heuristic_preference&) = delete;
  heuristic_preference& operator=(const heuristic_preference&) = delete;
  ~heuristic_preference() { cublasLtMatmulPreferenceDestroy(preference); }
  cublasLtMatmulPreference_t preference = nullptr;
};

void set_epilogue(cublasLtMatmulDesc_t desc, cublasLtEpilogue_t epilogue) {
  TROUPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
}

}  // namespace

struct cublaslt_gemm::plan {
  plan() = default;
  plan(const plan&) = delete;
  plan& operator=(const plan&) = delete;
  ~plan() {
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
  cublasLtMatmulDesc_t desc = nullptr;
  bool bias_epilogue = false;
  std::int64_t bucket_m = 0;
  cublasLtMatmulAlgo_t bucket_algo{};
  /// Algorithms confirmed (or re-chosen) for M values other than the bucket's.
  std::unordered_map<std::int64_t, cublasLtMatmulAlgo_t> algo_by_m;
};

cublaslt_gemm::cublaslt_gemm(std::size_t workspace_bytes) : workspace_(workspace_bytes) {
  TROUPE_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

cublaslt_gemm::~cublaslt_gemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

std::int64_t cublaslt_gemm::m_bucket(std::int64_t m) {
  if (m <= 8192) {
    std::int64_t bucket = 1;
    while (bucket < m) bucket *= 2;
    return bucket;
  }
  return (m + 4095) / 4096 * 4096;
}

namespace {

// The heuristic's first choice for `layouts`, or false when it has none.
bool best_algorithm(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const matrix_layouts& layouts,
                    const heuristic_preference& preference, cublasLtMatmulAlgo_t* algo) {
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, desc, layouts.a, layouts.b, layouts.c, layouts.c,
                                                               preference.preference, 1, &result, &count);
  if (status != CUBLAS_STATUS_SUCCESS || count == 0) return false;
  *algo = result.algo;
  return true;
}

std::string describe(const gemm_problem& p) {
  return "M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) + " K=" + std::to_string(p.k) + " out " +
         std::string(dtype_name(p.out_type));
}

}  // namespace

cublaslt_gemm::plan& cublaslt_gemm::plan_for(const gemm_problem& problem) {
  const std::uint32_t alignment = problem_alignment(problem);
  const shape_key key{m_bucket(problem.m),
                      problem.n,
                      problem.k,
                      static_cast<int>(problem.out_type),
                      problem.x_stride,
                      problem.out_stride,
                      static_cast<int>(alignment),
                      problem.bias != nullptr};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;

  auto created = std::make_unique<plan>();
  created->bucket_m = std::get<0>(key);
  TROUPE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&created->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasOperation_t keep = CUBLAS_OP_N;
  TROUPE_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(created->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
  TROUPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(created->desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
  const matrix_layouts layouts(problem, created->bucket_m);
  const heuristic_preference preference(workspace_.bytes(), alignment);
  bool found = false;
  if (problem.bias != nullptr) {
    const cudaDataType_t bias_type = cuda_type(problem.out_type);
    set_epilogue(created->desc, CUBLASLT_EPILOGUE_BIAS);
    TROUPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(created->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                       sizeof bias_type));
    TROUPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(created->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &problem.bias,
                                                       sizeof problem.bias));
    found = best_algorithm(handle_, created->desc, layouts, preference, &created->bucket_algo);
    created->bias_epilogue = found;
    if (!found) set_epilogue(created->desc, CUBLASLT_EPILOGUE_DEFAULT);  // fall back to a separate bias kernel
  }
  if (!found) found = best_algorithm(handle_, created->desc, layouts, preference, &created->bucket_algo);
  if (!found) throw std::runtime_error("cuBLASLt has no algorithm for the linear layer " + describe(problem));
  return *plans_.emplace(key, std::move(created)).first->second;
}

const cublasLtMatmulAlgo_t& cublaslt_gemm::algo_for(plan& plan, const gemm_problem& problem) {
  if (problem.m == plan.bucket_m) return plan.bucket_algo;
  if (auto it = plan.algo_by_m.find(problem.m); it != plan.algo_by_m.end()) return it->second;
  // The bucket's algorithm usually serves every M in the bucket; confirm it
  // once per M and ask the heuristic for this M when it does not.
  const matrix_layouts layouts(problem, problem.m);
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t status = cublasLtMatmulAlgoCheck(handle_, plan.desc, layouts.a, layouts.b, layouts.c, layouts.c,
                                                        &plan.bucket_algo, &check);
  cublasLtMatmulAlgo_t chosen = plan.bucket_algo;
  if (status != CUBLAS_STATUS_SUCCESS || check.workspaceSize > workspace_.bytes()) {
    const heuristic_preference preference(workspace_.bytes(), problem_alignment(problem));
    if (!best_algorithm(handle_, plan.desc, layouts, preference, &chosen))
      throw std::runtime_error("cuBLASLt has no algorithm for the linear layer " + describe(problem));
  }
  return plan.algo_by_m.emplace(problem.m, chosen).first->second;
}

void cublaslt_gemm::run(const gemm_problem& problem, cudaStream_t stream) {
  if (problem.m == 0 || problem.n == 0) return;
  plan& plan = plan_for(problem);
  if (plan.bias_epilogue) {
    TROUPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &problem.bias,
                                                       sizeof problem.bias));
  }
  const cublasLtMatmulAlgo_t& algo = algo_for(plan, problem);
  const matrix_layouts layouts(problem, problem.m);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  TROUPE_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, problem.w, layouts.a, problem.x, layouts.b, &beta,
                                     problem.out, layouts.c, problem.out, layouts.c, &algo, workspace_.data(),
                                     workspace_.bytes(), stream));
  if (problem.bias != nullptr && !plan.bias_epilogue) {
    add_bias_params bias;
    bias.out = problem.out;
    bias.out_stride = problem.out_stride;
    bias.bias = problem.bias;
    bias.type = problem.out_type;
    bias.rows = problem.m;
    bias.cols = problem.n;
    launch_add_bias(bias, stream);
  }
}

}  // namespace troupe::cuda
