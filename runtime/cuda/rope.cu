// Device rotary position embedding of libotcrt_cuda (otc.rope and its
// gradient, the same call with `transposed`): one launch, one thread per W
// consecutive pairs (j, j + dim / 2) of a row, so that each element of x is
// read once and each of y written once, in 16-byte packets (W = kPack<T>)
// when half a row is a multiple of a packet and the pointers are aligned,
// else one pair per thread. Threads of a warp run along a row's halves, so
// loads and stores are coalesced; the float tables are read through the
// cache (rows of them are shared by every head). Each element is formed in
// float and rounded once, as the host kernel does (the two agree to the
// rounding of one product and one sum; the GPU test compares them).
#include "common.cuh"

namespace otcrt {
namespace cuda {
namespace {

template <typename T, int W>
__global__ void ropeKernel(int64_t n1, int64_t n2, int64_t h, int64_t c0,
                           int64_t c1, int64_t c2, int64_t groups, const T *x,
                           const float *__restrict__ cos,
                           const float *__restrict__ sin, int32_t transposed,
                           T *y) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups)
    return;
  const int64_t perRow = h / W;
  const int64_t r = g / perRow, j = (g % perRow) * W;
  const int64_t i2 = r % n2, i1 = (r / n2) % n1, i0 = r / (n2 * n1);
  const int64_t t = i0 * c0 + i1 * c1 + i2 * c2;
  const float *cr = cos + t, *sr = sin + t;
  const T *xr = x + r * 2 * h;
  T *yr = y + r * 2 * h;
  float lo[W], hi[W], ylo[W], yhi[W];
  loadPacket<W>(xr + j, lo);
  loadPacket<W>(xr + j + h, hi);
#pragma unroll
  for (int i = 0; i < W; ++i) {
    const float cl = __ldg(cr + j + i), ch = __ldg(cr + j + h + i);
    const float sl = __ldg(sr + j + i), sh = __ldg(sr + j + h + i);
    ylo[i] = transposed ? lo[i] * cl + hi[i] * sh : lo[i] * cl - hi[i] * sl;
    yhi[i] = transposed ? hi[i] * ch - lo[i] * sl : hi[i] * ch + lo[i] * sh;
  }
  storePacket<W>(yr + j, ylo);
  storePacket<W>(yr + j + h, yhi);
}

template <typename T>
int rope(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t c0,
         int64_t c1, int64_t c2, const T *x, const float *cos, const float *sin,
         int32_t transposed, T *y, void *stream) {
  if (n0 < 0 || n1 < 0 || n2 < 0 || dim < 0 || dim % 2 != 0)
    return 1;
  const int64_t rows = n0 * n1 * n2, h = dim / 2;
  if (rows == 0 || h == 0)
    return 0;
  cudaStream_t s = asStream(stream);
  if (packable<T>(h, {x, y})) {
    const int64_t groups = rows * (h / kPack<T>);
    ropeKernel<T, kPack<T>>
        <<<static_cast<unsigned>((groups + kBlock - 1) / kBlock), kBlock, 0,
           s>>>(n1, n2, h, c0, c1, c2, groups, x, cos, sin, transposed, y);
  } else {
    const int64_t groups = rows * h;
    ropeKernel<T, 1>
        <<<static_cast<unsigned>((groups + kBlock - 1) / kBlock), kBlock, 0,
           s>>>(n1, n2, h, c0, c1, c2, groups, x, cos, sin, transposed, y);
  }
  return launchStatus();
}

} // namespace
} // namespace cuda
} // namespace otcrt

using otcrt::cuda::rope;

extern "C" {

int otcrt_rope_f32(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t c0,
                   int64_t c1, int64_t c2, const float *x, const float *cos,
                   const float *sin, int32_t transposed, float *y,
                   void *stream) {
  return rope(n0, n1, n2, dim, c0, c1, c2, x, cos, sin, transposed, y, stream);
}
int otcrt_rope_bf16(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t c0,
                    int64_t c1, int64_t c2, const otcrt_bf16 *x,
                    const float *cos, const float *sin, int32_t transposed,
                    otcrt_bf16 *y, void *stream) {
  return rope(n0, n1, n2, dim, c0, c1, c2, x, cos, sin, transposed, y, stream);
}

} // extern "C"
