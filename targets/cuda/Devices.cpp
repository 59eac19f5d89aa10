//===- Devices.cpp - the cuda target's device models ----------------------===//
//
// The GPUs `--device` selects for the cuda target, with the source of every
// figure: "measured" figures were taken on this team's machines (the H100
// ones are the medians of ../shared/ANCHORS.md, "H100 figures for a
// roofline", 2026-11-23, through PyTorch 2.11 and cuBLAS), "fitted" ones
// are the constants of a curve fitted to those measurements, "datasheet"
// ones are NVIDIA's published numbers and "estimate" ones are judgement, to
// be replaced by a measurement when one is taken.
//
//===----------------------------------------------------------------------===//

#include "targets/cuda/Cuda.h"
#include "targets/cuda/Launches.h"

#include "otcrt/device_peaks.h"

#include <cassert>

using namespace otc;

namespace {

/// The peaks of `name`'s row of the one table of otcrt/device_peaks.h (the
/// runtime's too): NVIDIA's published dense figures.
void setPeaks(DeviceModel &d, const char *name) {
  const OtcrtDevicePeak *peak = otcrt_device_peak_named(name);
  assert(peak && "a cuda device model without a row of device_peaks.h");
  d.peakBf16 = peak->bf16;
  d.peakFp32 = peak->fp32;
  d.peakSource = "datasheet, dense";
}

// The launch overhead of a kernel replayed from a CUDA graph on Hopper
// (derived): 1,000 tiny kernels in one graph replay take 1.33 us each
// (measured, ANCHORS.md), of which the model prices the tiny kernel's own
// work at one memory latency (kHopperMemoryLatency below); the rest,
// 0.83 us, is the overhead.
constexpr double kHopperMemoryLatency = 0.5e-6;
constexpr double kHopperLaunchGraph = 1.33e-6 - kHopperMemoryLatency;

// The GEMM curves on Hopper (fitted): least squares on the log of the time
// of the eight GPT-2 124M shapes of ANCHORS.md (8192 tokens: qkv, attention
// projection, MLP up and down, the LM head and its two gradients, one
// head's scores) against the curve of GemmRate plus the launch. BF16 at 790
// TFLOP/s: a fixed cost of 4 us per call, launch included (the fit prefers
// 6 us, held at 4 so that the many small GEMMs of small models are not
// overcharged) and 260 reduction steps per output tile: every shape within
// 12% of its measured time (the worst, MLP up 8192 x 768 x 3072: 62.2 us
// measured, 69.5 us predicted). FP32 at 50 TFLOP/s: 11 us per call and 17.5
// steps per tile, every shape within 9%. TF32 (unused): BF16's fixed cost,
// 280 steps per tile, within 20%. The fit predates the wave quantization
// (LaunchModel.h), which costs these shapes 0-3% (their tiles fill 97-100%
// of their waves).
constexpr GemmRate kHopperBf16{/*rate=*/790e12, /*depthKnee=*/260,
                               /*fixedSeconds=*/4e-6 - kHopperLaunchGraph};
constexpr GemmRate kHopperFp32{/*rate=*/50e12, /*depthKnee=*/17.5,
                               /*fixedSeconds=*/11e-6 - kHopperLaunchGraph};
// FP8 (E4M3/E5M2 operands, FP32 accumulation, BF16 result), estimate: the
// dense FP8 peak of the datasheet is twice the BF16 one (1979 against
// 989.4 TFLOP/s), so the measured BF16 rate doubled, 1580 TFLOP/s; the
// fitted fixed cost of BF16 per call, and its 260-step knee doubled (the
// same prologue and epilogue time per tile, at twice the rate per
// reduction step). To be replaced by a fit to measured FP8 GEMMs.
constexpr GemmRate kHopperFp8{/*rate=*/2 * 790e12, /*depthKnee=*/2 * 260,
                              /*fixedSeconds=*/4e-6 - kHopperLaunchGraph};
constexpr GemmRate kHopperTf32{/*rate=*/364e12, /*depthKnee=*/280,
                               /*fixedSeconds=*/4e-6 - kHopperLaunchGraph};

DeviceModel h100() {
  DeviceModel d;
  d.name = "h100";
  d.description = "NVIDIA H100 SXM 80GB (HBM3, 132 SMs)";
  // Hopper, compute capability 9.0: programs are built for sm_90.
  d.arch = "90";
  // BF16: a large GEMM reaches about 790 TFLOP/s (measured; the issue and
  // ANCHORS.md). FP32 with FP32 compute: 45-51 TFLOP/s on the ANCHORS.md
  // shapes, 50 for the large ones (measured). TF32: 308-364 TFLOP/s on the
  // same shapes (measured), curve assumed to be BF16's.
  d.bf16Gemm = kHopperBf16;
  d.fp32Gemm = kHopperFp32;
  d.tf32Gemm = kHopperTf32;
  d.fp8Gemm = kHopperFp8;
  // Flash attention (SDPA, causal, B 8, 12 heads, T 1024, D 64, BF16),
  // 12 layers: forward 0.61 ms, backward 1.89 ms (measured, ANCHORS.md),
  // i.e. 3.15e11 and 7.83e11 FLOPs as the cost interface counts them
  // (4·B·H·T·S·D + 5·B·H·T·S forward, 10·B·H·T·S·D + 8·B·H·T·S backward).
  // otc's BF16 path is cuDNN's SDPA. Its forward is assumed to match
  // (estimate: too short for the traces' threshold). Its deterministic
  // backward was measured slower, 337 TFLOP/s a call at micro-batch 8 and
  // 363 at 16 (GPT-2 124M traces on an H100,
  // bench/results/2026-11-26-nvidia-h100-s9-warp-norms-trace.txt): 350,
  // between the two.
  d.attentionFwdRate = 517e12;
  d.attentionBwdRate = 350e12;
  // The runtime's own attention kernels (FP32, dropout): estimate.
  d.attentionFallbackRate = 25e12;
  // The runtime's expert kernels (runtime/cuda/expert_matmul.cu): WMMA's
  // mma.sync tiles of 64 x 64 without an asynchronous copy pipeline, where
  // cuBLASLt runs Hopper's wgmma. An estimate until otc-kernel-bench's
  // expert cases measure it on a GPU.
  d.ownGemmShare = 0.3;
  // FP32 without tensor cores: 67 TFLOP/s datasheet, 60 reached (estimate).
  d.vectorRate = 60e12;
  // A 1 GiB device-to-device copy takes 0.716 ms: 3.0 TB/s counting bytes
  // read and written (measured; 3.35 TB/s datasheet).
  d.bandwidth = 3.0e12;
  // 132 SMs (datasheet, H100 SXM5); an SM holds at most 2048 threads and 32
  // blocks (CUDA C++ Programming Guide, compute capability 9.0) and has 128
  // FP32 lanes (4 partitions of 32; Hopper whitepaper), and 228 KB of
  // shared memory, 1 KB of it reserved per resident block (same guide),
  // carved from its 256 KB of L1 data cache (Hopper whitepaper).
  d.sms = 132;
  d.maxThreadsPerSm = 2048;
  d.maxBlocksPerSm = 32;
  d.fp32LanesPerSm = 128;
  d.sharedPerSm = 228 << 10;
  d.l1PerSm = 256 << 10;
  // A load that misses the caches: 0.5 us (estimate: published Hopper
  // microbenchmarks put an unloaded global load at roughly 400-800 cycles,
  // about 0.2-0.45 us at the 1.755-1.98 GHz boost clocks, and queueing
  // under load adds to it; to be replaced by a measurement, e.g. the column
  // sums of a `train --trace` against their prediction). A load that hits
  // the SM's L1: about 30 cycles, 0.02 us (estimate, same sources).
  d.memoryLatency = kHopperMemoryLatency;
  d.cacheLatency = 0.02e-6;
  // cuBLASLt's Hopper BF16 kernels compute 128 x 128 output tiles, one CTA
  // per SM at a time, and split K into slices of at least 512 where that
  // fills the SMs better (estimate: the tile of its common sm90 kernels; the
  // split assumes its heuristics choose the best of those decompositions).
  d.gemmTile = 128;
  d.gemmMinSplitK = 512;
  // From a graph replay: 0.83 us besides the kernel's work (derived above
  // from 1.33 us measured per tiny kernel). From the host: about 4 us per
  // cudaLaunchKernel (estimate; PyTorch eager measured 10.4 us with its
  // dispatch).
  d.launchEager = 4e-6;
  d.launchGraph = kHopperLaunchGraph;
  d.cudaGraphs = true;
  // The runtime's gradient norm, as it launches it (GeneratedLaunches.cpp).
  d.gradientNormLaunches = &cuda::gradientNormLaunches;
  setPeaks(d, "h100");
  // Eight H100 SXM on NVLink 4 through NVSwitch (an HGX/DGX H100): NCCL's
  // ring all-reduce of hundreds of MB reaches about 450 GB/s of bus
  // bandwidth (estimate, from published nccl-tests all_reduce_perf results
  // on such machines, 450-480 GB/s; to be replaced by a measurement on a
  // lent multi-GPU machine); a call's fixed cost about 30 us (estimate:
  // the small-message times of the same results).
  d.allReduceBusBandwidth = 450e9;
  d.collectiveLatency = 30e-6;
  d.link = "NVLink 4 (NVSwitch, 8 GPUs)";
  return d;
}

DeviceModel h200() {
  // The same GH100 chip as the H100 SXM, with more and faster memory.
  DeviceModel d = h100();
  d.name = "h200";
  d.description = "NVIDIA H200 SXM 141GB (HBM3e, 132 SMs)";
  // 4.8 TB/s datasheet; reached: the H100's ratio of measured to datasheet
  // (3.0 / 3.35) applied, 4.3 TB/s (estimate). GEMM, attention and launch
  // figures as the H100's (estimate: "a large BF16 GEMM reaches ~790
  // TFLOP/s on an H100 or H200", ANCHORS.md, published).
  d.bandwidth = 4.3e12;
  setPeaks(d, "h200");
  return d;
}

} // namespace

llvm::ArrayRef<DeviceModel> otc::cuda::devices() {
  static const DeviceModel models[] = {h100(), h200()};
  return models;
}
