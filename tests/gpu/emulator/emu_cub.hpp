#pragma once
// Host stand-ins for the CUB pieces the sampling kernels use: block reduce
// and scan built on the emulator's barriers (the reduce's result is garbage
// outside thread 0, as in CUB), and a stable descending segmented sort on
// the float keys' radix order.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>
namespace cub {
template <class T, int THREADS>
class BlockReduce {
 public:
  struct TempStorage {
    T values[THREADS];
    T result;
  };
  explicit BlockReduce(TempStorage& s) : s_(s) {}
  template <class Op>
  T Reduce(T v, Op op) {
    const int tid = static_cast<int>(threadIdx.x);
    s_.values[tid] = v;
    __syncthreads();
    T result = s_.values[0];
    for (int i = 1; i < THREADS; ++i) result = op(result, s_.values[i]);
    __syncthreads();
    // CUB defines the result in thread 0 only: give the others garbage.
    if (tid != 0) std::memset(static_cast<void*>(&result), 0x5A, sizeof(T));
    return result;
  }

 private:
  TempStorage& s_;
};
template <class T, int THREADS>
class BlockScan {
 public:
  struct TempStorage {
    T values[THREADS * 8];
  };
  explicit BlockScan(TempStorage& s) : s_(s) {}
  template <int ITEMS>
  void InclusiveSum(T (&in)[ITEMS], T (&out)[ITEMS], T& aggregate) {
    static_assert(ITEMS <= 8);
    const int tid = static_cast<int>(threadIdx.x);
    for (int k = 0; k < ITEMS; ++k) s_.values[tid * ITEMS + k] = in[k];
    __syncthreads();
    T running{};
    T total{};
    for (int i = 0; i < THREADS * ITEMS; ++i) total += s_.values[i];
    for (int i = 0; i < tid * ITEMS; ++i) running += s_.values[i];
    for (int k = 0; k < ITEMS; ++k) {
      running += s_.values[tid * ITEMS + k];
      out[k] = running;
    }
    aggregate = total;
    __syncthreads();
  }

 private:
  TempStorage& s_;
};
struct DeviceSegmentedRadixSort {
  template <class K, class V, class O>
  static cudaError_t SortPairsDescending(void* temp, std::size_t& bytes, const K* keys_in, K* keys_out,
                                         const V* values_in, V* values_out, long long, long long segments, O begin,
                                         O end, int = 0, int = 64, cudaStream_t = nullptr) {
    if (temp == nullptr) {
      bytes = 16;
      return cudaSuccess;
    }
    for (long long s = 0; s < segments; ++s) {
      const int b = begin[s], e = end[s];
      std::vector<int> idx(e - b);
      std::iota(idx.begin(), idx.end(), b);
      // radix order on float bits: descending, stable
      auto key = [&](int i) {
        unsigned u;
        std::memcpy(&u, &keys_in[i], 4);
        return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
      };
      std::stable_sort(idx.begin(), idx.end(), [&](int x, int y) { return key(x) > key(y); });
      for (int i = 0; i < e - b; ++i) {
        keys_out[b + i] = keys_in[idx[i]];
        values_out[b + i] = values_in[idx[i]];
      }
    }
    return cudaSuccess;
  }
};
}  // namespace cub
