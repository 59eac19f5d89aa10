//===- GeneratedLaunches.cpp - generated kernels and the gradient norm ----===//
//
// The launches of the cuda target that no library op describes: a generated
// kernel's (the OTC_LAUNCH the emitter prints) and the runtime's gradient
// norm before a clipped optimizer step (sum_squares.cu). See Launches.h.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelBodies.h"
#include "codegen/Launches.h"
#include "targets/cuda/Launches.h"

#include "otcrt/launch_config.h"

#include <algorithm>

using namespace mlir;
using namespace otc;

KernelLaunch cuda::generatedLaunch(otck::KernelOp k) {
  KernelLaunch l;
  l.threads = kGeneratedBlock;
  // n: the items the launch is sized by; units: what one thread's loop
  // iteration takes; rest: a vectorized chain's elements left one by one.
  int64_t n = 0, units = 0, rest = 0;
  ItemSteps item;
  if (emittedAsChain(k)) {
    l.what = "elements";
    n = cast<MemRefType>(k.getOutputs()[0].getType()).getNumElements();
    int width = chainVectorWidth(k);
    units = n / width;
    rest = n % width;
  } else {
    Operation &op = k.getBody().front().front();
    l.what = "items";
    n = workItems(&op);
    // A slice's or concat's 16-byte packets, AdamW's 4 elements: one item
    // each, as the emitter launches them.
    n = units = n / packedItemWidth(&op, n);
    item = workItemSteps(&op);
  }
  // The grid: by packets for a vectorized chain (OTC_LAUNCH_PACKETS), else
  // by items.
  int64_t launched = std::clamp<int64_t>(
      (units + kGeneratedBlock - 1) / kGeneratedBlock, 1, kGeneratedMaxBlocks);
  int64_t perThread =
      (units + launched * kGeneratedBlock - 1) / (launched * kGeneratedBlock);
  l.blocks = std::clamp<int64_t>(
      (units + kGeneratedBlock - 1) / kGeneratedBlock, 1, launched);
  l.steps = perThread * item.memory + (rest ? 1 : 0);
  l.cachedSteps = perThread * item.cached;
  return l;
}

void cuda::gradientNormLaunches(
    const DeviceModel &, ArrayRef<std::pair<int64_t, int64_t>> elementsByWidth,
    SmallVectorImpl<KernelLaunch> &launches) {
  int64_t partials = 0;
  for (auto [width, n] : elementsByWidth) {
    KernelLaunch l;
    l.what = "partial sums of squares";
    l.blocks = otcrt_sumsq_blocks(n);
    l.threads = OTCRT_CUDA_ROW_BLOCK;
    // Each thread's loop over 16-byte packets (the gradient slots are
    // aligned): rounds of OTCRT_CUDA_SUMSQ_UNROLL loads in flight, then
    // what is left one load at a time, then one element past the last
    // whole packet (the first threads).
    int64_t perPacket = OTCRT_CUDA_PACKET_BYTES / width;
    int64_t packets = n / perPacket;
    int64_t iterations =
        (packets + l.blocks * l.threads - 1) / (l.blocks * l.threads);
    l.steps = iterations / OTCRT_CUDA_SUMSQ_UNROLL +
              iterations % OTCRT_CUDA_SUMSQ_UNROLL + (n % perPacket != 0);
    l.bytes = double(width) * double(n);
    partials += l.blocks;
    launches.push_back(l);
  }
  KernelLaunch finish;
  finish.what = "factor";
  finish.threads = OTCRT_CUDA_ROW_BLOCK;
  finish.steps =
      (std::max<int64_t>(partials, 1) + finish.threads - 1) / finish.threads;
  finish.bytes = 8.0 * double(partials) + 12.0;
  launches.push_back(finish);
}
