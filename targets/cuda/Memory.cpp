//===- Memory.cpp - the cuda target's memory outside the arena ------------===//
//
// What a cuda program holds on the device besides its arena
// (passes/DeviceMemory.h). The runtime's buffers of fixed size are one
// table, kCudaRuntimeBuffers (their sizes in runtime/include/otcrt/
// workspace.h); the buffers that grow with the program's shapes come from
// its attention calls: cuDNN's SDPA builds one graph per shape and options,
// each with a workspace of its own kept for the life of the process, and
// the fallback kernels grow one scratch buffer per use, keeping every
// smaller one they replace; and from its FP8 GEMMs (--precision=fp8), whose
// operands' FP8 copies grow the same way.
//
//===----------------------------------------------------------------------===//

#include "ir/Fp8.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"
#include "targets/cuda/Cuda.h"
#include "targets/cuda/Launches.h"

#include "otcrt/workspace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <set>
#include <tuple>

using namespace mlir;
using namespace otc;

namespace {

/// A buffer of fixed size that the cuda runtime allocates once.
struct FixedBuffer {
  const char *name;
  int64_t bytes;
  const char *basis;
};

/// The cuda runtime's buffers of fixed size, one line each: a new one (a
/// constant of otcrt/workspace.h, such as a reduction scratch) is a line
/// here, and counts in plan.json's `libraries` and `total_peak`.
const FixedBuffer kCudaRuntimeBuffers[] = {
    {"gemm_workspace", OTCRT_CUDA_GEMM_WORKSPACE_BYTES,
     "cuBLASLt workspace, OTCRT_CUDA_GEMM_WORKSPACE_BYTES "
     "(runtime/cuda/gemm_cublaslt.cpp)"},
    {"reduction_scratch", OTCRT_CUDA_REDUCTION_SCRATCH_BYTES,
     "the kernel library's two-stage reductions and gather-gradient partials, "
     "OTCRT_CUDA_REDUCTION_SCRATCH_BYTES (runtime/cuda/scratch.h)"},
    {"sort_scratch", OTCRT_CUDA_SORT_SCRATCH_BYTES,
     "the gather gradient's stable sort of positions, "
     "OTCRT_CUDA_SORT_SCRATCH_BYTES (runtime/cuda/gather_grad.cu)"},
};

/// The CUDA context and the cuBLASLt and cuDNN handles (estimate).
constexpr int64_t kCudaContextBytes = int64_t(512) << 20;
constexpr const char *kCudaContextBasis =
    "estimate: a CUDA 12/13 context on an H100 with lazily loaded modules "
    "(the default since CUDA 12.2) holds about 0.4-0.5 GiB as nvidia-smi "
    "counts a process, the cuBLASLt and cuDNN handles and the kernels they "
    "load tens of MiB more, and the runtime's allocations under 64 KiB (the "
    "kernel error record, the cross-entropy row count, the gradient norm's "
    "partial sums) round into it: 512 MiB, bench/README.md's allowance "
    "beside llm.c's measured 5.0 GiB; to be replaced by a measurement "
    "(bench/speed.py's otc_peak_bytes less the arena and the libraries)";

/// What cuDNN builds a graph for (attention_cudnn.cpp's GraphKey, the
/// device aside): direction, sizes, scale, causal, the mask (a bias read
/// with its strides) or a key padding (lengths), sinks (the forward's sink
/// token), layout and window. Each graph has its own workspace.
using GraphKey = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t,
                            int64_t, double, bool, bool, bool, bool,
                            SmallVector<int64_t, 4>, std::string, int64_t>;

template <typename OpTy> GraphKey graphKey(OpTy op, bool backward) {
  AttentionSizes a = attentionSizes(op);
  SmallVector<int64_t, 4> strides(4, 0);
  bool padding = cuda::attentionKeyPaddingAsLengths(op.getOperation());
  if (Value m = op.getMask(); m && !padding)
    strides = SmallVector<int64_t, 4>(broadcastStrides(
        cast<ShapedType>(m.getType()).getShape(), {a.b, a.h, a.t, a.s}));
  return {backward,
          a.b,
          a.h,
          a.hk,
          a.t,
          a.s,
          a.d,
          op.getScale().convertToDouble(),
          op.getCausal(),
          bool(op.getMask()) && !padding,
          padding,
          !backward && bool(op.getSinks()),
          strides,
          op.getLayout().str(),
          static_cast<int64_t>(op.getWindow())};
}

int64_t roundUp64(int64_t n) { return (n + 63) / 64 * 64; }

/// A scratch buffer of the runtime that grows to the largest need, keeping
/// every buffer it replaces (a captured graph may still read it): `kept`
/// bytes in all.
struct Scratch {
  int64_t size = 0, kept = 0;
};
void grow(Scratch &s, int64_t need) {
  if (need <= s.size)
    return;
  s.size = need;
  s.kept += need;
}

/// The attention calls' buffers: cuDNN's workspaces, one per graph, and the
/// fallback kernels' scratch (attention.cu), grown per use in call order.
class AttentionBuffers {
public:
  void add(Operation *op) {
    bool backward = isa<AttentionGradOp>(op);
    AttentionSizes a = attentionSizes(op);
    if (cuda::attentionRunsOnCudnn(op)) {
      GraphKey key = isa<AttentionOp>(op)
                         ? graphKey(cast<AttentionOp>(op), false)
                         : graphKey(cast<AttentionGradOp>(op), true);
      // A mask broadcast over the queries (a key padding) is written out
      // along them and the heads for cuDNN, in BF16, rows padded to 8.
      if (int64_t written = cuda::attentionMaskWrittenOut(op))
        grow(mask, 2 * written);
      // A key padding goes as lengths: 2 x b int32 (keyLengths).
      if (cuda::attentionKeyPaddingAsLengths(op))
        grow(lengths, 8 * ((a.b + 3) / 4 * 4));
      // The sinks' gradient after a cuDNN backward: D_i per query row, in
      // the fallback kernels' buffer (attention.cu, sinkGradient).
      if (backward && cast<AttentionGradOp>(op).getSinks())
        grow(rowD, 4 * a.b * a.h * a.t);
      if (!graphs.insert(key).second || !backward)
        return;
      // The deterministic backward on Hopper (cuDNN before 9.25) computes
      // dP into a workspace of b·h·⌈t⌉₆₄·⌈s⌉₆₄ BF16 values, beside the
      // frontend's own workspace, the per-row softmax sum (b·h·t floats);
      // the forward's workspace holds nothing (ALiBi slopes only).
      cudnnBytes +=
          a.b * a.h * roundUp64(a.t) * roundUp64(a.s) * 2 + a.b * a.h * a.t * 4;
      return;
    }
    // The fallback kernels: D_i per query row for the backward, and
    // [b, h, t, d] copies of a [b, t, h, d] call's operands (forward: q, k,
    // v and the output; backward: those, dO and the three gradients).
    int64_t element = storageBytes(
        cast<ShapedType>(op->getOperand(backward ? 1 : 0).getType())
            .getElementType());
    int64_t qn = a.b * a.h * a.t * a.d, kvn = a.b * a.hk * a.s * a.d;
    if (backward)
      grow(rowD, 4 * a.b * a.h * a.t);
    bool bhtd = isa<AttentionOp>(op)
                    ? cast<AttentionOp>(op).getLayout() == "bhtd"
                    : cast<AttentionGradOp>(op).getLayout() == "bhtd";
    if (!bhtd)
      grow(layout, element * (backward ? 4 : 2) * (qn + kvn));
  }

  int64_t cudnn() const { return cudnnBytes + mask.kept + lengths.kept; }
  int64_t fallback() const { return rowD.kept + layout.kept; }

private:
  std::set<GraphKey> graphs;
  int64_t cudnnBytes = 0;
  Scratch rowD, layout, mask, lengths;
};

/// The FP8 GEMMs' buffers (runtime/cuda/gemm_fp8.cpp): its own cuBLASLt
/// workspace and, for a GEMM that quantizes its own operands (one without
/// otc-fp8-copies' copies, which lie in the arena), their FP8 copies (A's
/// rounded up to 256 bytes, then B's) and, for a GELU or addend epilogue,
/// the FP32 product, each grown per call shape keeping what it replaces; 0
/// without FP8 GEMMs.
class Fp8GemmBuffers {
public:
  void add(otck::GemmOp g) {
    if (!gemmFp8(g))
      return;
    ArrayRef<int64_t> a = g.getLhs().getType().getShape(),
                      c = g.getOut().getType().getShape();
    int64_t m = numElements(c.drop_back(1)), n = c.back();
    int64_t k = g.getTransposeLhs() ? a[a.size() - 2] : a.back();
    if (!g.getLhsFp8())
      grow(operands, (m * k + 255) / 256 * 256 + n * k);
    if (g.getGelu() || g.getDgelu() || g.getAddend())
      grow(product, 4 * m * n);
    any = true;
  }
  int64_t bytes() const {
    return any ? OTCRT_CUDA_GEMM_WORKSPACE_BYTES + operands.kept + product.kept
               : 0;
  }

private:
  Scratch operands, product;
  bool any = false;
};

} // namespace

void otc::cuda::memoryOutsideArena(ModuleOp planned, OutsideArena &r) {
  for (const FixedBuffer &b : kCudaRuntimeBuffers)
    r.buffers.push_back({b.name, b.bytes, b.basis});
  r.gemmWorkspace = OTCRT_CUDA_GEMM_WORKSPACE_BYTES;

  // The attention calls, in the order the program makes them.
  AttentionBuffers attention;
  Fp8GemmBuffers fp8;
  // The FP32 sums of the GEMMs that sum an operand into BF16 or into their
  // old values (runtime/cuda/gemm_sums.cpp's scratch, grown to the widest).
  int64_t sumsScratch = 0;
  for (StringRef fn : {"zero_grads", "micro_step", "optimizer_step",
                       "eval_step", "decode_step"})
    if (auto f = planned.lookupSymbol<func::FuncOp>(fn))
      f.walk([&](Operation *op) {
        if (isa<AttentionOp, AttentionGradOp>(op))
          attention.add(op);
        if (auto g = dyn_cast<otck::GemmOp>(op)) {
          fp8.add(g);
          if (Value sums = g.getSums()) {
            auto t = cast<MemRefType>(sums.getType());
            if (g.getAccumulateSums() || !t.getElementType().isF32())
              sumsScratch = std::max(sumsScratch, 4 * t.getNumElements());
          }
        }
      });
  if (sumsScratch)
    r.buffers.push_back(
        {"gemm_sums", sumsScratch,
         "the FP32 sums of the GEMMs that form a bias's gradient into a BF16 "
         "or accumulated slot, 4 bytes a column of the widest "
         "(runtime/cuda/gemm_sums.cpp)"});
  if (fp8.bytes())
    r.buffers.push_back(
        {"fp8_gemm", fp8.bytes(),
         "the FP8 GEMMs' cuBLASLt workspace, OTCRT_CUDA_GEMM_WORKSPACE_BYTES, "
         "the FP8 copies of the operands of those without copies in the "
         "arena and the FP32 product of a GELU or addend epilogue, each grown "
         "per call shape (runtime/cuda/gemm_fp8.cpp)"});
  if (attention.cudnn())
    r.buffers.push_back(
        {"cudnn_sdpa", attention.cudnn(),
         "cuDNN SDPA workspaces, one per attention shape: the deterministic "
         "backward's dP, b·h·⌈t⌉₆₄·⌈s⌉₆₄·2 bytes on Hopper with cuDNN before "
         "9.25, and the frontend's softmax sum, b·h·t·4 (cudnn-frontend "
         "1.32's scaled_dot_product_flash_attention.h); the forward's, none "
         "(estimate); and a key-padding mask written out along the queries, "
         "as cuDNN's bias takes it (runtime/cuda/attention.cu)"});
  if (attention.fallback())
    r.buffers.push_back(
        {"attention_scratch", attention.fallback(),
         "the attention fallback kernels' scratch per device "
         "(runtime/cuda/attention.cu): D_i per query row (also for the sinks' "
         "gradient after a cuDNN backward), and [b, h, t, d] copies of "
         "[b, t, h, d] operands, every size it grew through kept"});
  r.context = kCudaContextBytes;
  r.contextBasis = kCudaContextBasis;
}

