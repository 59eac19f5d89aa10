//===- Devices.cpp - the cpu target's device model ------------------------===//
//
// The machine `--device=cpu` predicts the cpu target's step on, with the
// source of every figure ("measured" on this team's build machine,
// "estimate" judgement).
//
//===----------------------------------------------------------------------===//

#include "targets/cpu/Cpu.h"

using namespace otc;

namespace {

DeviceModel buildMachine() {
  DeviceModel d;
  d.name = "cpu";
  d.description = "the cpu target's build machine (2 cores, AVX-512)";
  // Measured on this team's build machine (Intel Xeon, 2 cores under KVM,
  // shared with other work, so these vary by tens of percent) with
  // bench/cpu_device_rates.cpp, built and run as its header says:
  //   memcpy 256 MiB: 19.4-20.2 GB/s read + written
  //   elementwise multiply-add loop (64K items): 9-10.5 GFLOP/s
  // GEMMs through OpenBLAS's OpenMP build on the runtime's 2 threads
  // (cpu/gemm.cpp; Debian's libopenblas0-openmp, which CI installs):
  // otcrt_gemm at GPT-2-shaped 4 x 256, micro-batch 8 (2048 x 1024 x 256,
  // 2048 x 256 x 1024 transposed, 256 x 1024 x 2048 accumulating): 217-242
  // GFLOP/s (measured, 2026-11-26). The built-in GEMM (OTCRT_BLAS=off, or
  // no OpenBLAS) reaches 28-30 GFLOP/s, and OpenBLAS's pthread build on its
  // one thread about 100. Shallow products are slower: the LM head's weight
  // gradient, 8192 x 256, added into over K = 64, 128, 256, 512, 1024 rows:
  // 187, 205, 204, 210, 214 GFLOP/s (measured), which a knee of 8
  // reduction steps fits (K / (K + 8): 0.89 at 64, 0.97 at 256; fitted).
  // The BF16 GEMM widens its operands and runs the FP32 one (same rate,
  // estimate); the curve's fixed cost is one OpenMP region (estimate).
  constexpr double gemm = 230e9;
  d.bf16Gemm = {gemm, /*depthKnee=*/8, /*fixedSeconds=*/5e-6};
  d.fp32Gemm = d.bf16Gemm;
  d.tf32Gemm = d.bf16Gemm;
  d.vectorRate = 10e9;
  // The kernel library's attention in tiles of GEMMs (cpu/attention.cpp),
  // FLOPs as the cost interface counts them (the causal half included),
  // same model, b 8, h 4, t 256, d 64: forward 0.547 GFLOP in 6.6-7.4 ms
  // (74-84 GFLOP/s), backward 1.359 GFLOP in 7.7-8.4 ms (161-176 GFLOP/s)
  // (measured, train --trace). There is no other attention kernel on the
  // cpu, so no fallback rate: the step-time model prices every cpu call by
  // these two.
  d.attentionFwdRate = 80e9;
  d.attentionBwdRate = 170e9;
  d.bandwidth = 20e9;
  // Kernels are function calls and OpenMP regions, a few µs (estimate);
  // there are no graphs, and no grids: every launch is priced by the
  // roofline.
  d.launchEager = d.launchGraph = 2e-6;
  d.cudaGraphs = false;
  // Ranks as processes on this machine, Open MPI over shared memory:
  // MPI_Allreduce of 64-256 MiB of floats on 2 ranks, 2.48-2.52 GB/s of bus
  // bandwidth (measured, bench/collectives/mpi_allreduce.c; 4 ranks on the
  // 2 cores: 1.5-1.6). 1 MiB took 0.11 ms, at 9.3 GB/s: the fixed cost is
  // small against the gradients' (estimate: 20 us).
  d.allReduceBusBandwidth = 2.5e9;
  d.collectiveLatency = 20e-6;
  d.link = "shared memory (Open MPI, one machine)";
  // No datasheet: MFU on the cpu is quoted against the measured GEMM rate.
  d.peakBf16 = d.peakFp32 = gemm;
  d.peakSource = "measured GEMM rate";
  return d;
}

} // namespace

llvm::ArrayRef<DeviceModel> otc::cpu::devices() {
  static const DeviceModel models[] = {buildMachine()};
  return models;
}
