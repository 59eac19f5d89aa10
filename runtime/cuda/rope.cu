// Device rotary position embedding of libotcrt_cuda (otc.rope and its
// gradient, the same call with `transposed`): one launch. The first `rot`
// features of a row rotate in pairs (p, p + rot / 2), or (2p, 2p + 1) when
// interleaved; the others are copied. A thread takes W consecutive pairs
// (two 16-byte packets of x's type, W = kPack<T>: the two halves' packets,
// or two adjacent packets when interleaved) or one packet of the copied
// features, when half the rotary width and the row are multiples of a
// packet and the pointers are aligned; else one pair or one copied element.
// Each element of x is read once and each of y written once; threads of a
// warp run along a row, so loads and stores are coalesced; the float tables
// are read through the cache (rows of them are shared by every head). Each
// element is formed in float and rounded once, as the host kernel does (the
// two agree to the rounding of one product and one sum; the GPU test
// compares them).
#include "common.cuh"

namespace otcrt {
namespace cuda {
namespace {

/// The shape of a call: rows of `dim`, `rot` rotating, the tables' strides.
struct RopeShape {
  int64_t n1, n2, dim, rot, c0, c1, c2;
  int64_t rotGroups; // threads of a row's rotated features (W pairs each)
  int64_t perRow;    // threads of a row (copied features: W each)
  int64_t groups;    // threads of the launch
};

template <typename T, int W, bool Interleaved>
__global__ void
ropeKernel(RopeShape s, const T *x, const float *__restrict__ cos,
           const float *__restrict__ sin, int32_t transposed, T *y) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= s.groups)
    return;
  const int64_t r = g / s.perRow, k = g % s.perRow;
  const T *xr = x + r * s.dim;
  T *yr = y + r * s.dim;
  if (k >= s.rotGroups) {
    const int64_t j = s.rot + (k - s.rotGroups) * W;
    float v[W];
    loadPacket<W>(xr + j, v);
    storePacket<W>(yr + j, v);
    return;
  }
  const int64_t i2 = r % s.n2, i1 = (r / s.n2) % s.n1, i0 = r / (s.n2 * s.n1);
  const int64_t t = i0 * s.c0 + i1 * s.c1 + i2 * s.c2;
  const float *cr = cos + t, *sr = sin + t;
  // Two packets u[0], u[1] at base[0], base[1]: the halves' (pair i is
  // u[0][i], u[1][i]) or two adjacent ones (pair i is the 2i-th and
  // 2i+1-th of the W * 2 elements).
  const int64_t p0 = k * W;
  const int64_t base[2] = {Interleaved ? 2 * p0 : p0,
                           Interleaved ? 2 * p0 + W : p0 + s.rot / 2};
  float u[2][W], v[2][W];
  loadPacket<W>(xr + base[0], u[0]);
  loadPacket<W>(xr + base[1], u[1]);
#pragma unroll
  for (int i = 0; i < W; ++i) {
    const int qa = Interleaved ? 2 * i : i,
              qb = Interleaved ? 2 * i + 1 : W + i;
    const int64_t a = base[qa / W] + qa % W, b = base[qb / W] + qb % W;
    const float xa = u[qa / W][qa % W], xb = u[qb / W][qb % W];
    const float ca = __ldg(cr + a), cb = __ldg(cr + b);
    const float sa = __ldg(sr + a), sb = __ldg(sr + b);
    v[qa / W][qa % W] = transposed ? xa * ca + xb * sb : xa * ca - xb * sa;
    v[qb / W][qb % W] = transposed ? xb * cb - xa * sa : xb * cb + xa * sb;
  }
  storePacket<W>(yr + base[0], v[0]);
  storePacket<W>(yr + base[1], v[1]);
}

template <typename T, int W>
void launchRope(RopeShape s, int64_t rows, const T *x, const float *cos,
                const float *sin, int32_t transposed, int32_t interleaved, T *y,
                cudaStream_t stream) {
  s.rotGroups = s.rot / 2 / W;
  s.perRow = s.rotGroups + (s.dim - s.rot) / W;
  s.groups = rows * s.perRow;
  if (s.groups == 0)
    return;
  const unsigned blocks =
      static_cast<unsigned>((s.groups + kBlock - 1) / kBlock);
  if (interleaved)
    ropeKernel<T, W, true>
        <<<blocks, kBlock, 0, stream>>>(s, x, cos, sin, transposed, y);
  else
    ropeKernel<T, W, false>
        <<<blocks, kBlock, 0, stream>>>(s, x, cos, sin, transposed, y);
}

template <typename T>
int rope(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t rot,
         int64_t c0, int64_t c1, int64_t c2, const T *x, const float *cos,
         const float *sin, int32_t transposed, int32_t interleaved, T *y,
         void *stream) {
  if (n0 < 0 || n1 < 0 || n2 < 0 || rot < 0 || rot % 2 != 0 || dim < rot)
    return 1;
  const int64_t rows = n0 * n1 * n2;
  if (rows == 0 || dim == 0)
    return 0;
  RopeShape s{n1, n2, dim, rot, c0, c1, c2, 0, 0, 0};
  cudaStream_t st = asStream(stream);
  if (packable<T>(dim, {x, y}) && (rot / 2) % kPack<T> == 0)
    launchRope<T, kPack<T>>(s, rows, x, cos, sin, transposed, interleaved, y,
                            st);
  else
    launchRope<T, 1>(s, rows, x, cos, sin, transposed, interleaved, y, st);
  return launchStatus();
}

} // namespace
} // namespace cuda
} // namespace otcrt

using otcrt::cuda::rope;

extern "C" {

int otcrt_rope_f32(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t rot,
                   int64_t c0, int64_t c1, int64_t c2, const float *x,
                   const float *cos, const float *sin, int32_t transposed,
                   int32_t interleaved, float *y, void *stream) {
  return rope(n0, n1, n2, dim, rot, c0, c1, c2, x, cos, sin, transposed,
              interleaved, y, stream);
}
int otcrt_rope_bf16(int64_t n0, int64_t n1, int64_t n2, int64_t dim,
                    int64_t rot, int64_t c0, int64_t c1, int64_t c2,
                    const otcrt_bf16 *x, const float *cos, const float *sin,
                    int32_t transposed, int32_t interleaved, otcrt_bf16 *y,
                    void *stream) {
  return rope(n0, n1, n2, dim, rot, c0, c1, c2, x, cos, sin, transposed,
              interleaved, y, stream);
}

} // extern "C"
