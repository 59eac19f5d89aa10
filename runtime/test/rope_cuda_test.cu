// GPU check of the rotary embedding of libotcrt_cuda (otcrt_rope_*, otc.rope
// and its transposed call, the gradient) against the host kernel of
// libotcrt_cpu: Llama's shapes ([B, H, T, 64] against [T, 64] tables, and
// the sequence-major [B, T, H, 64] against [1, T, 1, 64] that the fusion
// moves a rope to), half rows that are no whole packet (the one-pair path),
// rows off 16-byte alignment, per-batch tables, partial rotary widths
// (GPT-NeoX's 16 of 64 features, a width whose half is no packet) and
// GPT-J's interleaved pairs, f32 and bf16 storage. Both
// form each element in float from the same products and round once, so
// they agree within float rounding of a product and a sum (bf16: within a
// unit of the stored result). Part of otcrt-cuda-kernel-tests
// (kernels_cuda_test.cu runs it).
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "cuda_test_util.cuh"
#include "otcrt/kernels.h"

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace cudatest {
namespace {

/// The rotary form of a call: the rotated width (0: the whole row) and
/// whether pairs interleave.
struct Form {
  int64_t rot = 0;
  int interleaved = 0;
};

/// One shape: x [n0, n1, n2, dim], the tables' element strides c0..c2 over
/// a table of `tableElements`, x and y `skew` elements past alignment.
void testRope(std::mt19937 &rng, int64_t n0, int64_t n1, int64_t n2,
              int64_t dim, int64_t c0, int64_t c1, int64_t c2,
              int64_t tableElements, size_t skew = 0, Form form = {}) {
  const int64_t rot = form.rot ? form.rot : dim;
  const int il = form.interleaved;
  const size_t n = n0 * n1 * n2 * dim;
  Floats x = random(n, rng), cos = random(tableElements, rng),
         sin = random(tableElements, rng);
  float *dcos = device(cos), *dsin = device(sin);
  for (int transposed = 0; transposed < 2; ++transposed) {
    Check c(std::string("rope") + (transposed ? " transposed" : "") + " " +
            std::to_string(n0) + "x" + std::to_string(n1) + "x" +
            std::to_string(n2) + "x" + std::to_string(dim) + " rot " +
            std::to_string(rot) + (il ? " interleaved" : "") +
            (skew ? " skewed" : ""));
    Floats want(n);
    c.rc(otcrt::cpu::rope(n0, n1, n2, dim, rot, c0, c1, c2, x.data(),
                          cos.data(), sin.data(), transposed, il, want.data()),
         "cpu rope");
    float *dx = device(x, skew), *dy = device(Floats(n), skew);
    c.rc(otcrt_rope_f32(n0, n1, n2, dim, rot, c0, c1, c2, dx, dcos, dsin,
                        transposed, il, dy, nullptr),
         "otcrt_rope_f32");
    c.rc(cudaDeviceSynchronize(), "sync");
    c.f32(host(dy, n), want, "y", 1e-5);

    Bf16s xb = toBf16(x), wantB(n);
    c.rc(otcrt::cpu::rope(n0, n1, n2, dim, rot, c0, c1, c2, xb.data(),
                          cos.data(), sin.data(), transposed, il, wantB.data()),
         "cpu rope bf16");
    otcrt_bf16 *dxb = device(xb, skew), *dyb = device(Bf16s(n), skew);
    c.rc(otcrt_rope_bf16(n0, n1, n2, dim, rot, c0, c1, c2, dxb, dcos, dsin,
                         transposed, il, dyb, nullptr),
         "otcrt_rope_bf16");
    c.rc(cudaDeviceSynchronize(), "sync");
    c.bf16(host(dyb, n), wantB, "y bf16");
  }
}

} // namespace

void testRopes(std::mt19937 &rng) {
  // Llama 3.2 1B's query heads at T = 256: [B, H, T, D], [T, D] tables.
  testRope(rng, 2, 32, 256, 64, 0, 0, 64, 256 * 64);
  // The sequence-major layout: [B, T, H, D], [1, T, 1, D] tables.
  testRope(rng, 2, 256, 8, 64, 0, 64, 0, 256 * 64);
  // Per-batch tables [B, 1, T, D]; half rows of 3 (one pair a thread).
  testRope(rng, 3, 4, 5, 6, 5 * 6, 0, 6, 3 * 5 * 6);
  // Rows off alignment take the one-pair path too.
  testRope(rng, 2, 4, 16, 64, 0, 0, 64, 16 * 64, 1);
  testRope(rng, 1, 1, 7, 2, 0, 0, 2, 7 * 2);
  // GPT-NeoX's partial rotary (16 of 64 features; tables [T, 16]; half the
  // width, 8, is whole packets of f32 and of bf16), off alignment, and a
  // width whose half is odd (6 of 20: one pair a thread).
  testRope(rng, 2, 8, 64, 64, 0, 0, 16, 64 * 16, 0, {16, 0});
  testRope(rng, 2, 3, 5, 20, 0, 0, 6, 5 * 6, 0, {6, 0});
  testRope(rng, 2, 4, 16, 64, 0, 0, 16, 16 * 16, 1, {16, 0});
  // GPT-J's interleaved pairs: full width, partial (64 of 256 as GPT-J 6B,
  // sequence-major [B, T, H, D] against [1, T, 1, R]), and one pair a thread.
  testRope(rng, 2, 32, 128, 64, 0, 0, 64, 128 * 64, 0, {64, 1});
  testRope(rng, 2, 64, 4, 256, 0, 64, 0, 64 * 64, 0, {64, 1});
  testRope(rng, 3, 2, 5, 10, 0, 0, 6, 5 * 6, 0, {6, 1});
  testRope(rng, 2, 4, 16, 64, 0, 0, 32, 16 * 32, 1, {32, 1});
}

} // namespace cudatest
