// Host expert products of libotcrt_cpu (otc.expert_matmul and its weight
// gradient): a mixture of experts' rows, each multiplied with the matrix of
// the expert its index names. The rows are grouped by expert with a stable
// counting sort (each group keeps row order); each expert's rows are
// gathered into a float block (bf16 widened exactly), multiplied by the
// GEMM of cpu/gemm.cpp (OpenBLAS where installed) against the expert's
// matrix, and the results scattered back to their rows. The weight
// gradient gathers an expert's rows of x and of dy alike and takes x^T dy
// (or dy^T x for experts stored transposed) in one GEMM over them. No
// [rows, depth, width] tensor of gathered matrices is ever built, and the
// order of every sum is fixed by the indices alone. The float results are
// stored as float or bfloat16 (rounded once), the weight gradient's also
// added into what its output holds (a gradient slot: its value plus the
// float sum, rounded once).
#include "common.h"
#include "kernels_cpu.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace otcrt {
namespace cpu {
namespace {

/// The rows of each expert: order[begin[e], begin[e + 1]) in row order.
/// Rows whose index is outside [-experts, experts) are in no group.
struct Groups {
  std::vector<int64_t> begin, order;
};

Groups groupRows(int64_t rows, int64_t experts, const int64_t *ids) {
  auto expertOf = [&](int64_t n) {
    int64_t e = ids[n] < 0 ? ids[n] + experts : ids[n];
    return e >= 0 && e < experts ? e : int64_t{-1};
  };
  Groups g;
  g.begin.assign(static_cast<size_t>(experts) + 1, 0);
  for (int64_t n = 0; n < rows; ++n)
    if (int64_t e = expertOf(n); e >= 0)
      ++g.begin[e + 1];
  for (int64_t e = 0; e < experts; ++e)
    g.begin[e + 1] += g.begin[e];
  g.order.resize(static_cast<size_t>(g.begin[experts]));
  std::vector<int64_t> next(g.begin.begin(), g.begin.end() - 1);
  for (int64_t n = 0; n < rows; ++n)
    if (int64_t e = expertOf(n); e >= 0)
      g.order[next[e]++] = n;
  return g;
}

/// Rows `order[0, count)` of the [*, cols] matrix `src`, as floats, into
/// `dst` [count, cols].
template <typename T>
void gatherRows(const T *src, int64_t cols, const int64_t *order,
                int64_t count, float *dst) {
#pragma omp parallel for schedule(static) if (count * cols >= 65536)
  for (int64_t i = 0; i < count; ++i) {
    const T *row = src + order[i] * cols;
    for (int64_t c = 0; c < cols; ++c)
      dst[i * cols + c] = load(row[c]);
  }
}

bool validSizes(int64_t rows, int64_t experts, int64_t depth, int64_t width,
                int32_t transposeW) {
  return rows >= 0 && experts >= 1 && depth >= 1 && width >= 1 &&
         (transposeW == 0 || transposeW == 1);
}

/// Where a kernel stores its float results: elements of `type` (OTC_F32,
/// or OTC_BF16 for bfloat16 data), overwritten or, with `add`, each its
/// value plus the result; rounded once either way.
struct Output {
  void *base;
  int32_t type;
  bool add;

  /// Whether `type` is one the kernel of storage T writes.
  template <typename T> bool valid() const {
    return type == OTC_F32 ||
           (type == OTC_BF16 && std::is_same_v<T, otcrt_bf16>);
  }
  size_t elementBytes() const { return type == OTC_F32 ? 4 : 2; }
  /// The float elements [at, ...) when results go there as they are.
  float *direct(int64_t at) const {
    return type == OTC_F32 && !add ? static_cast<float *>(base) + at : nullptr;
  }
  /// Zeros in the elements [at, at + count).
  void zero(int64_t at, int64_t count) const {
    std::memset(static_cast<char *>(base) + at * elementBytes(), 0,
                static_cast<size_t>(count) * elementBytes());
  }
  void put(int64_t at, float v) const {
    if (type == OTC_F32) {
      float *p = static_cast<float *>(base) + at;
      *p = add ? *p + v : v;
    } else {
      otcrt_bf16 *p = static_cast<otcrt_bf16 *>(base) + at;
      store(p, add ? load(*p) + v : v);
    }
  }
};

/// W_e as floats: the stored matrix itself, or widened into `scratch`.
template <typename T>
const float *expertMatrix(const T *w, int64_t size,
                          std::vector<float> &scratch) {
  if constexpr (std::is_same_v<T, float>) {
    return w;
  } else {
    scratch.resize(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i)
      scratch[i] = load(w[i]);
    return scratch.data();
  }
}

template <typename T>
int expertMatmulImpl(int64_t rows, int64_t experts, int64_t depth,
                     int64_t width, int32_t transposeW, const T *x,
                     const int64_t *ids, const T *w, Output out) {
  if (!validSizes(rows, experts, depth, width, transposeW) || !out.valid<T>())
    return 1;
  if (rows == 0)
    return 0;
  out.zero(0, rows * width);
  Groups g = groupRows(rows, experts, ids);
  std::vector<float> xs, ys, we;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t count = g.begin[e + 1] - g.begin[e];
    if (count == 0)
      continue;
    const int64_t *order = g.order.data() + g.begin[e];
    xs.resize(static_cast<size_t>(count * depth));
    ys.resize(static_cast<size_t>(count * width));
    gatherRows(x, depth, order, count, xs.data());
    const float *wf = expertMatrix(w + e * depth * width, depth * width, we);
    matmul(false, transposeW != 0, count, width, depth, 1.0f, xs.data(), depth,
           wf, transposeW ? depth : width, 0.0f, ys.data(), width);
    // Each row's results to its row, rounded once to the output's type.
#pragma omp parallel for schedule(static) if (count * width >= 65536)
    for (int64_t i = 0; i < count; ++i)
      for (int64_t c = 0; c < width; ++c)
        out.put(order[i] * width + c, ys[i * width + c]);
  }
  return 0;
}

template <typename T>
int expertMatmulWgradImpl(int64_t rows, int64_t experts, int64_t depth,
                          int64_t width, int32_t transposeW, const T *dy,
                          const T *x, const int64_t *ids, Output dw) {
  if (!validSizes(rows, experts, depth, width, transposeW) || !dw.valid<T>())
    return 1;
  Groups g = groupRows(rows, experts, ids);
  const int64_t size = depth * width;
  std::vector<float> xs, ds, sums;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t count = g.begin[e + 1] - g.begin[e];
    if (count == 0) {
      if (!dw.add)
        dw.zero(e * size, size);
      continue;
    }
    const int64_t *order = g.order.data() + g.begin[e];
    xs.resize(static_cast<size_t>(count * depth));
    ds.resize(static_cast<size_t>(count * width));
    gatherRows(x, depth, order, count, xs.data());
    gatherRows(dy, width, order, count, ds.data());
    // The sums straight into dw when it takes them as they are.
    float *dwE = dw.direct(e * size);
    if (!dwE) {
      sums.resize(static_cast<size_t>(size));
      dwE = sums.data();
    }
    // [depth, width] = xs^T ds, or [width, depth] = ds^T xs.
    if (transposeW)
      matmul(true, false, width, depth, count, 1.0f, ds.data(), width,
             xs.data(), depth, 0.0f, dwE, depth);
    else
      matmul(true, false, depth, width, count, 1.0f, xs.data(), depth,
             ds.data(), width, 0.0f, dwE, width);
    if (dwE == sums.data())
      for (int64_t i = 0; i < size; ++i)
        dw.put(e * size + i, sums[i]);
  }
  return 0;
}

} // namespace

int expertMatmul(int64_t rows, int64_t experts, int64_t depth, int64_t width,
                 int32_t transposeW, const float *x, const int64_t *ids,
                 const float *w, int32_t outType, void *out) {
  return expertMatmulImpl(rows, experts, depth, width, transposeW, x, ids, w,
                          Output{out, outType, false});
}
int expertMatmul(int64_t rows, int64_t experts, int64_t depth, int64_t width,
                 int32_t transposeW, const otcrt_bf16 *x, const int64_t *ids,
                 const otcrt_bf16 *w, int32_t outType, void *out) {
  return expertMatmulImpl(rows, experts, depth, width, transposeW, x, ids, w,
                          Output{out, outType, false});
}
int expertMatmulWgrad(int64_t rows, int64_t experts, int64_t depth,
                      int64_t width, int32_t transposeW, const float *dy,
                      const float *x, const int64_t *ids, int32_t dwType,
                      int32_t accumulate, void *dw) {
  return expertMatmulWgradImpl(rows, experts, depth, width, transposeW, dy, x,
                               ids, Output{dw, dwType, accumulate != 0});
}
int expertMatmulWgrad(int64_t rows, int64_t experts, int64_t depth,
                      int64_t width, int32_t transposeW, const otcrt_bf16 *dy,
                      const otcrt_bf16 *x, const int64_t *ids, int32_t dwType,
                      int32_t accumulate, void *dw) {
  return expertMatmulWgradImpl(rows, experts, depth, width, transposeW, dy, x,
                               ids, Output{dw, dwType, accumulate != 0});
}

} // namespace cpu
} // namespace otcrt
