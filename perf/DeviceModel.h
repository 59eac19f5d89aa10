//===- DeviceModel.h - the devices a step time is predicted for -*- C++ -*-===//
//
// The figures the step-time model needs for each device otc predicts step
// times on (`otc-compile --device=NAME`): the matrix rates the GEMM library
// reaches, with a curve for the shapes that do not reach them, the rate of
// other arithmetic, the memory bandwidth, what a GPU runs at once (SMs,
// threads and blocks per SM, FP32 lanes per SM) and how long a thread waits
// for a load, the cost of one kernel launch with and without CUDA graphs,
// and the dense BF16 peak that MFU is quoted against. Every figure states
// where it comes from in its target's targets/<t>/Devices.cpp. The models
// are data; what uses them is perf/LaunchModel.h (one launch) and
// perf/StepTime.h (the step).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_DEVICEMODEL_H
#define OTC_CODEGEN_DEVICEMODEL_H

#include "perf/GridLaunch.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <utility>

namespace otc {

/// How fast the GEMM library multiplies matrices of one element type: a
/// product of W = 2·M·N·K·batch FLOPs over reduction depth K takes
///   W / (rate · K / (K + depthKnee)) + fixedSeconds
/// (plus a launch): large products reach `rate`; each output tile pays a
/// prologue and epilogue worth depthKnee steps of the reduction loop, and
/// each call a fixed cost, so small products do not reach it. Equivalently,
/// rate · W / (W + rate · fixedSeconds) when K is large.
struct GemmRate {
  double rate = 0;
  double depthKnee = 0;
  double fixedSeconds = 0;
};

/// One device of the table.
struct DeviceModel {
  /// `--device` name and a line for people.
  llvm::StringRef name, description;
  /// The GPU architecture its programs are compiled for, as nvcc's
  /// compute capability ("90": sm_90); empty on the cpu. (The target a
  /// device belongs to is the one whose folder lists it: ir/TargetRegistry.h.)
  llvm::StringRef arch;
  /// GEMMs with BF16 operands (FP32 accumulation), with FP32 operands and
  /// FP32 compute (what the runtime asks cuBLASLt for), and with TF32
  /// compute (recorded for comparison: no otc GEMM uses it).
  GemmRate bf16Gemm, fp32Gemm, tf32Gemm;
  /// GEMMs with FP8 operands (E4M3 or E5M2), FP32 accumulation and a BF16
  /// result (--precision=fp8); rate 0: the device has none (the cpu).
  GemmRate fp8Gemm;
  /// Fused attention (FLOPs as its cost interface counts them, a causal
  /// mask counted in full): forward and backward through the BF16 library
  /// path, and the rate of the runtime's own (fallback) kernels on a GPU;
  /// on the cpu (no grids) the forward and backward rates price its one
  /// kind of kernel.
  double attentionFwdRate = 0, attentionBwdRate = 0, attentionFallbackRate = 0;
  /// The share of `bf16Gemm`'s rate that the runtime's own BF16 GEMM
  /// kernels (the experts' products) reach; their FP32 form is priced at
  /// `fp32Gemm`'s. 1 where one kind of GEMM runs them all (the cpu).
  double ownGemmShare = 1.0;
  /// FLOP/s of the arithmetic of generated kernels and non-GEMM library
  /// kernels (FP32 without tensor cores).
  double vectorRate = 0;
  /// Bytes per second, bytes read and bytes written both counted.
  double bandwidth = 0;
  /// What a GPU runs at once, for pricing a launch by its grid
  /// (perf/LaunchModel.h): streaming multiprocessors, the threads and
  /// blocks one SM holds, and its FP32 lanes (the threads it needs to issue
  /// arithmetic at its share of `vectorRate`). Zero on the cpu, whose
  /// launches are priced by the roofline alone.
  int64_t sms = 0, maxThreadsPerSm = 0, maxBlocksPerSm = 0, fp32LanesPerSm = 0;
  /// Shared memory one SM gives its resident blocks, and its L1 data cache
  /// (shared memory carved from it): rows a kernel reads again stay there
  /// while the resident blocks' rows fit.
  int64_t sharedPerSm = 0, l1PerSm = 0;
  /// Seconds one dependent step of a thread waits: for a load served by
  /// memory (also the latency of Little's law), and by the SM's L1 cache.
  double memoryLatency = 0, cacheLatency = 0;
  /// The output tile (M and N) of the GEMM library's kernels, one per SM at
  /// a time, and the shortest K of one slice of a split-K product: the
  /// GEMMs' wave quantization (0: none).
  int64_t gemmTile = 0, gemmMinSplitK = 0;
  /// Seconds one kernel launch adds besides its work: launched from the
  /// host one by one, and replayed from a CUDA graph.
  double launchEager = 0, launchGraph = 0;
  /// Whether the target's runtime replays its steps from CUDA graphs (so
  /// `launchGraph` applies).
  bool cudaGraphs = false;
  /// The link between data-parallel ranks, for the all-reduce of the
  /// gradients: its bus bandwidth as nccl-tests defines it (a ring
  /// all-reduce of B bytes over n ranks moves 2 (n - 1) / n B through each
  /// rank's link), the fixed seconds of one collective call, and what it
  /// is, for people. Zero bandwidth: no figure (one rank only).
  double allReduceBusBandwidth = 0, collectiveLatency = 0;
  llvm::StringRef link;
  /// The dense BF16 and FP32 peaks MFU is quoted against (FLOP/s) and their
  /// source: a GPU's row of the one table of runtime/include/otcrt/
  /// device_peaks.h, which the runtime quotes train's MFU against too.
  double peakBf16 = 0, peakFp32 = 0;
  llvm::StringRef peakSource;
  /// The peak of a program of `precision` ("fp32", "bf16"; "fp8" is quoted
  /// against BF16's, the precision of all but its FP8 products).
  double peakFor(llvm::StringRef precision) const {
    return precision == "bf16" || precision == "fp8" ? peakBf16 : peakFp32;
  }

  /// The kernels the target's runtime launches for the gradient norm of a
  /// clipped step (no op of the program: the runtime's own), over gradient
  /// slots of `elementsByWidth` (bytes an element -> elements); null where
  /// launches are priced by the roofline alone (the cpu). Set by the
  /// target's Devices.cpp, as everything a GPU launches is its target's.
  void (*gradientNormLaunches)(
      const DeviceModel &device,
      llvm::ArrayRef<std::pair<int64_t, int64_t>> elementsByWidth,
      llvm::SmallVectorImpl<KernelLaunch> &launches) = nullptr;

  /// The launch overhead charged per launch: a graph replay's where the
  /// runtime replays graphs.
  double launchSeconds() const {
    return cudaGraphs ? launchGraph : launchEager;
  }
  /// Whether launches are priced by their grid (a GPU).
  bool pricesGrids() const { return sms > 0; }
};

/// The device called `name` of any registered target (targets/<t>/
/// Devices.cpp), or null.
const DeviceModel *lookupDevice(llvm::StringRef name);

/// The names of the registered devices, comma separated ("cpu, h100, h200").
std::string knownDeviceNames();

/// Seconds of a GEMM of `flops` (2·M·N·K·batch) over reduction depth `k`
/// on the curve of `rate`, launch excluded, its rate scaled by `efficiency`
/// (the share of the SMs its tiles keep busy: LaunchModel.h) and its
/// epilogue's depthKnee by `epilogueScale` (gemmEpilogueScale).
double gemmSeconds(const GemmRate &rate, double flops, int64_t k,
                   double efficiency = 1.0, double epilogueScale = 1.0);

/// How much longer a GEMM's epilogue runs than that of the products its
/// curve was fitted on, which wrote their result once in the operands' type
/// (BF16: 2 bytes an element; FP32: 4): `bytesPerElement` (of the result,
/// written, plus read when it accumulates, plus an addend or aux matrix)
/// over that. The epilogue's cost is its bytes through memory, not hidden
/// under the products of the tile: on an H100 (bench/kernels, 2026-11-26)
/// the LM head's weight gradient, 50304 x 768 over K = 1024 rows, took
/// 0.145 ms writing BF16, 0.164 writing FP32 and 0.238 adding into FP32;
/// over K = 2048: 0.223, 0.247, 0.300; over K = 4096: 0.415, 0.440, 0.463.
/// Beyond the product at 790 TFLOP/s, that is 0.014-0.045, 0.039-0.063 and
/// 0.062-0.137 ms (means 0.027, 0.050, 0.100) against 0.025, 0.051 and
/// 0.101 priced with the knee scaled by 1, 2 and 4.
double gemmEpilogueScale(bool bf16Curve, double bytesPerElement);

/// Seconds of a ring all-reduce of `bytes` over `ranks` ranks on the
/// device's link: collectiveLatency + 2 (ranks - 1) / ranks * bytes /
/// allReduceBusBandwidth; 0 for one rank.
double allReduceSeconds(const DeviceModel &device, double bytes,
                        int64_t ranks);

/// Seconds of a ring collective that moves `bytes` (the whole buffer) over
/// `ranks` ranks in `passes` passes around the ring: collectiveLatency +
/// passes (ranks - 1) / ranks * bytes / allReduceBusBandwidth (a
/// reduce-scatter or an all-gather is one pass, an all-reduce two); 0 for
/// one rank.
double ringSeconds(const DeviceModel &device, double bytes, int64_t ranks,
                   int passes);

} // namespace otc

#endif // OTC_CODEGEN_DEVICEMODEL_H
