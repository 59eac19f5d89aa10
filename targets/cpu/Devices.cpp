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
  //   gemm f32 256^3, 512^3, 1024^3 (otcrt_gemm of libotcrt_cpu):
  //     28-30 GFLOP/s
  //   memcpy 256 MiB: 19.4-20.2 GB/s read + written
  //   elementwise multiply-add loop (64K items): 9-10.5 GFLOP/s
  // The BF16 GEMM widens its operands and runs the FP32 one (same rate,
  // estimate); the curve's fixed cost is one OpenMP region (estimate).
  constexpr double gemm = 28e9;
  d.bf16Gemm = {gemm, /*depthKnee=*/0, /*fixedSeconds=*/5e-6};
  d.fp32Gemm = d.bf16Gemm;
  d.tf32Gemm = d.bf16Gemm;
  // The kernel library's attention is plain loops (estimate: the
  // elementwise rate).
  d.vectorRate = 10e9;
  d.attentionFwdRate = d.attentionBwdRate = d.attentionFallbackRate =
      d.vectorRate;
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
