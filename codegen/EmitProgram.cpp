//===- EmitProgram.cpp - planned otck module to C++ or CUDA source --------===//
//
// Emits the training program: one function per otck function (`zero_grads`,
// `micro_step`, `optimizer_step`, and `init_constants`, empty when the
// module has none) that binds each buffer to its arena offset and runs
// kernels, GEMM calls and copies in order; one kernel function per
// otck.kernel; and the OtcProgram descriptor (ABI version 11) over the tables
// of DescriptorTables.cpp (the slot table, the ranges of the integer inputs
// that index a table, the groups and buckets) that the runtime
// (runtime/include/otcrt/abi.h) reads. What differs between the cpu target
// (OpenMP loops) and the cuda target (grid-stride kernels on the runtime's
// stream, 16-byte packets) is asked of the configuration's Target
// (codegen/Target.h; each target's in targets/<t>/). Programs with BF16 buffers
// get a prelude defining `otc_bf16`, BF16 storage whose loads widen to float
// and whose stores round to nearest even, in __host__ __device__ functions so
// that both targets round identically.
//
//===----------------------------------------------------------------------===//

#include "codegen/Bf16Prelude.h"
#include "codegen/BodyUtils.h"
#include "codegen/Codegen.h"
#include "codegen/DescriptorTables.h"
#include "codegen/GemmCalls.h"
#include "codegen/IndexRanges.h"
#include "codegen/KernelAbi.h"
#include "codegen/Launches.h"
#include "codegen/ScalarExprPrinter.h"
#include "codegen/Target.h"
#include "ir/Config.h"
#include "ir/Fp8.h"
#include "ir/Functions.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/ShapeUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "ir/GradientBuckets.h"
#include "llvm/Support/Path.h"


using namespace mlir;
using namespace otc;

namespace {

class ProgramEmitter {
public:
  ProgramEmitter(const EmitOptions &options, ConfigAttr config,
                 const Target &target)
      : opts(options), config(config), target(target) {}

  LogicalResult emit(ModuleOp module, raw_ostream &os);

private:
  LogicalResult emitFunction(func::FuncOp f);
  LogicalResult emitKernel(otck::KernelOp k);
  LogicalResult emitLibraryCall(otck::KernelOp k, LibraryCallOpInterface op);
  LogicalResult emitElementwiseChain(otck::KernelOp k);
  /// A kernel's parameters (`const T *in<i>`, then `T *out<i>`) and the
  /// buffers its launch passes for them.
  void kernelArguments(otck::KernelOp k, SmallVectorImpl<std::string> &params,
                       SmallVectorImpl<std::string> &args);
  /// Emits kernel `def` (its text after the name) once and its launch over
  /// `n` work items with `args`; `what` names it in comments and the trace.
  std::string loopHead(int64_t itemElements = 1) const;
  void emitLaunch(const std::string &def, int64_t n,
                  ArrayRef<std::string> args, StringRef node, StringRef what,
                  int width = 1);
  LogicalResult emitGemm(otck::GemmOp g);
  LogicalResult emitFp8Quantize(otck::Fp8QuantizeOp q);
  void emitCopy(otck::CopyOp c);

  const EmitOptions &opts;
  /// The module's configuration: target, micro-batch, grad-accum.
  ConfigAttr config;
  /// What the target of the configuration prints differently.
  const Target &target;
  /// File-scope text: constant tables and kernels, then functions.
  std::string globalsText, kernelsText, funcsText;
  llvm::raw_string_ostream globals{globalsText}, kernels{kernelsText},
      funcs{funcsText};
  /// Names of the buffers of the function being emitted.
  DenseMap<Value, std::string> names;
  /// The program-wide name of each slot, and their definitions.
  llvm::StringMap<std::string> slotNames;
  std::string slotDefsText;
  llvm::raw_string_ostream slotDefs{slotDefsText};
  unsigned kernelCount = 0, globalCount = 0;
  /// Kernels by their text after the name (signature, loop and body).
  llvm::StringMap<std::string> kernelByText;
  /// Arena bytes to zero, gathered across consecutive zero fills.
  ZeroFills zeroFills;
  /// Data parallelism overlapped with the backward (ir/GradientBuckets.h):
  /// the ops of @micro_step after which a bucket of gradients is final.
  llvm::DenseMap<Operation *, SmallVector<int>> readyAfter;
  void emitMemset(int64_t offset, int64_t bytes) {
    target.emitMemset(funcs, offset, bytes);
  }
  void flushZero() {
    zeroFills.flush([&](int64_t o, int64_t n) { emitMemset(o, n); });
  }
};

LogicalResult ProgramEmitter::emit(ModuleOp module, raw_ostream &os) {
  auto arena = module->getAttrOfType<IntegerAttr>(otck::kArenaSizeAttr);
  if (!arena)
    return module.emitError("buffers are not planned: run --otc-plan-buffers");
  if (auto a = module->getAttrOfType<IntegerAttr>(otck::kAlignmentAttr))
    zeroFills.setAlignment(a.getInt());
  SmallVector<GradientBucket> buckets = programGradientBuckets(module);
  for (auto [k, b] : llvm::enumerate(buckets))
    readyAfter[b.after].push_back(static_cast<int>(k));
  for (StringRef fn : {"zero_grads", "micro_step", "optimizer_step"}) {
    func::FuncOp f = requireFunction(module, fn, " to emit");
    if (!f)
      return failure();
    if (failed(emitFunction(f)))
      return failure();
  }
  if (auto f = module.lookupSymbol<func::FuncOp>("init_constants")) {
    if (failed(emitFunction(f)))
      return failure();
  } else {
    funcs << "static void otc_init_constants(char *) {}\n\n";
  }
  // Version 8: the loss of a micro-batch alone, for evaluation.
  bool eval = false;
  if (auto f = module.lookupSymbol<func::FuncOp>("eval_step")) {
    if (failed(emitFunction(f)))
      return failure();
    eval = true;
  }
  // Version 9: one position's logits with the keys and values cached
  // (--generate).
  bool decode = false;
  if (auto f = module.lookupSymbol<func::FuncOp>("decode_step")) {
    if (failed(emitFunction(f)))
      return failure();
    decode = true;
  }
  // Version 3: rounds the parameters' BF16 working copies from the masters
  // once they are loaded (otc-group-params; AdamW writes them afterwards).
  bool refresh = false;
  if (auto f = module.lookupSymbol<func::FuncOp>("refresh_params")) {
    if (failed(emitFunction(f)))
      return failure();
    refresh = true;
  }

  // The descriptor's tables, checked before anything is written.
  FailureOr<DescriptorTables> tables =
      emitDescriptorTables(module, config, buckets);
  if (failed(tables))
    return failure();

  os << "// Training program generated by otc-compile from "
     << llvm::sys::path::filename(opts.modelPath) << " for the "
     << target.name() << " target. Do not edit.\n"
     << "#include <cmath>\n#include <cstdint>\n#include <cstring>\n";
  target.emitIncludes(os);
  os << "#include \"otcrt/abi.h\"\n#include \"otcrt/kernels.h\"\n\n";
  if (usesBf16(module))
    os << bf16Prelude();
  // Short forms of what every function repeats (they keep model.cu small,
  // which is what nvcc's time grows with).
  os << "/// `T *name`: the arena's bytes from `offset` on.\n"
        "#define OTC_B(T, name, offset) T *name = (T *)(arena + (offset))\n"
        "/// A span of `train --trace` around one kernel, library call or "
        "GEMM.\n"
        "#define OTC_CALL(trace, ...) \\\n"
        "  do { const char *otc_at = trace; otcrt_trace_begin(otc_at); "
        "__VA_ARGS__; otcrt_trace_end(); } while (0)\n"
        "/// A kernel library call (inside OTC_CALL); a non-zero status stops "
        "the\n/// program, naming the function and the span.\n"
        "#define OTC_LIB(fn, ...) \\\n"
        "  do { if (int otc_status = fn(__VA_ARGS__)) "
        "otcrt_kernel_failed(#fn, otc_at, otc_status); } while (0)\n";
  target.emitLaunchMacros(os);
  os << globalsText << "\n" << kernelsText << "\n"
     << "/// The persistent slots, by name (an `arena` must be in scope).\n"
     << "#define OTC_SLOT(T, offset) ((T *)(arena + (offset)))\n"
     << slotDefsText << "\n"
     << funcsText << "\n";

  // Version 3: the input whose counted entries weigh micro-batches.
  std::string countInput = "nullptr";
  int64_t countIgnore = 0;
  if (auto n = module->getAttrOfType<StringAttr>(attrs::kCountInput)) {
    countInput = cString(n.getValue());
    if (auto i = module->getAttrOfType<IntegerAttr>(attrs::kCountIgnoreIndex))
      countIgnore = i.getInt();
  }
  // Version 11, every field of versions 5 to 10 with it: the precision,
  // tokens and FLOPs of a micro-step that the runtime reports throughput
  // and MFU with.
  constexpr int version = 11;
  int64_t tokens = 0, flops = 0;
  if (auto m = module->getAttrOfType<DictionaryAttr>(attrs::kMicroStep)) {
    if (auto t = m.getAs<IntegerAttr>("tokens"))
      tokens = t.getInt();
    if (auto f = m.getAs<IntegerAttr>("flops"))
      flops = f.getInt();
  }
  os << tables->text
     << "static const OtcProgram kProgram = {\n"
     << "  " << version << ", \"" << target.name() << "\", "
     << cString(opts.modelPath) << ", " << arena.getInt() << ",\n"
     << "  " << config.getMicroBatch() << ", " << config.getGradAccum() << ", "
     << tables->numSlots << ", kSlots,\n"
     << "  otc_zero_grads, otc_micro_step, otc_optimizer_step,\n"
     << "  otc_init_constants, " << tables->numIndexRanges << ", kIndexRanges,\n  "
     << countInput << ", "
     << (countIgnore == INT64_MIN ? std::string("INT64_MIN")
                                  : std::to_string(countIgnore) + "LL")
     << ",\n  " << (refresh ? "otc_refresh_params" : "nullptr");
  os << ",\n  " << (tables->shards ? "&kShards" : "nullptr");
  os << ",\n  " << tables->numBucketRanges << ", "
     << (tables->numBucketRanges ? "kBucketRanges" : "nullptr");
  os << ",\n  " << (eval ? "otc_eval_step" : "nullptr");
  os << ",\n  " << (decode ? "otc_decode_step" : "nullptr");
  os << ",\n  " << (config.bf16() ? "OTC_PRECISION_BF16" : "OTC_PRECISION_FP32")
     << ", " << tokens << ", " << flops << "LL};\n\n"
     << "int main(int argc, char **argv) {\n"
     << "  return otcrt_main(argc, argv, &kProgram);\n}\n";
  return success();
}

LogicalResult ProgramEmitter::emitFunction(func::FuncOp f) {
  names.clear();
  funcs << "static void otc_" << f.getSymName() << "(char *arena) {\n";
  target.emitFunctionPrologue(funcs);
  unsigned count = 0;
  for (Operation &op : f.getBody().front()) {
    if (auto b = dyn_cast<otck::BufferOp>(op)) {
      if (!b.getOffset())
        return b.emitOpError("has no offset: run --otc-plan-buffers");
      std::string t = cTypeOf(b.getType().getElementType());
      if (t.empty())
        return b.emitOpError("cannot emit element type ")
               << b.getType().getElementType();
      if (b.getSlot()) {
        // A slot has one name for the whole program, defined once.
        auto [it, fresh] = slotNames.try_emplace(
            *b.getSlot(), "sl" + std::to_string(slotNames.size()));
        if (fresh)
          slotDefs << "#define " << it->second << " OTC_SLOT(" << t << ", "
                   << *b.getOffset() << ")  // " << *b.getSlot() << "\n";
        names[b] = it->second;
        continue;
      }
      std::string name = "b" + std::to_string(count++);
      names[b] = name;
      funcs << "  OTC_B(" << t << ", " << name << ", " << *b.getOffset()
            << ");\n";
      continue;
    }
    if (zeroFills.take(op, [&](int64_t o, int64_t n) { emitMemset(o, n); }))
      continue;
    flushZero();
    LogicalResult r =
        TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](otck::KernelOp k) { return emitKernel(k); })
            .Case([&](otck::GemmOp g) { return emitGemm(g); })
            .Case([&](otck::Fp8QuantizeOp q) { return emitFp8Quantize(q); })
            .Case([&](otck::ViewOp v) {
              // A view is its source's bytes under another name; a rank's
              // part (ZeRO-1) starts where the running rank's part does.
              std::string name = "b" + std::to_string(count++);
              names[v.getResult()] = name;
              std::string t = cTypeOf(v.getType().getElementType());
              funcs << "  " << t << " *" << name << " = " << names[v.getSource()];
              if (v.getShards())
                funcs << " + (int64_t)otcrt_rank() * "
                      << v.getType().getNumElements() << ";  // this rank's 1/"
                      << *v.getShards() << "\n";
              else
                funcs << ";  // view\n";
              return success();
            })
            .Case([&](otck::CopyOp c) {
              emitCopy(c);
              return success();
            })
            .Case([&](func::ReturnOp) { return success(); })
            .Default([](Operation *op) {
              return op->emitOpError("cannot be emitted at the buffer level");
            });
    if (failed(r))
      return failure();
    // Version 7: the buckets whose gradients this op finished.
    if (auto ready = readyAfter.find(&op); ready != readyAfter.end()) {
      flushZero();
      for (int k : ready->second)
        funcs << "  otcrt_gradients_ready(" << k << ");\n";
    }
  }
  flushZero();
  funcs << "}\n\n";
  return success();
}

LogicalResult ProgramEmitter::emitKernel(otck::KernelOp k) {
  Block &body = k.getBody().front();
  if (!llvm::hasSingleElement(body.without_terminator())) {
    if (!isElementwiseKernel(k))
      return k.emitOpError("holds more than one op that are not all "
                           "elementwise of one shape");
    return emitElementwiseChain(k);
  }
  Operation &op = body.front();
  auto yield = cast<otck::YieldOp>(body.getTerminator());
  if (!llvm::equal(yield.getValues(), op.getResults()))
    return k.emitOpError("must yield its op's results in order");
  for (Value v : op.getOperands())
    if (!isa<BlockArgument>(v) || cast<BlockArgument>(v).getOwner() != &body)
      return k.emitOpError("body reads a value from outside the kernel");

  if (auto lib = dyn_cast<LibraryCallOpInterface>(op))
    return emitLibraryCall(k, lib);
  // On cuda, one elementwise op is a chain of one: it gets the chain's
  // 16-byte loads and stores (Launches.h: emittedAsChain).
  if (target.packsElementwise() && emittedAsChain(k))
    return emitElementwiseChain(k);

  // Names the kernel's globals (constant tables).
  std::string kname = "g" + std::to_string(globalCount++);
  SmallVector<std::string> params, args, in, out;
  kernelArguments(k, params, args);
  // On cuda a gather records an index outside its axis in the kernel
  // library's error record (the driver reads it after the micro-step).
  if (target.recordsIndexErrors() && isa<GatherOp>(op)) {
    params.push_back("OtcrtKernelError *otc_err");
    args.push_back("otcrt_kernel_error_record()");
  }
  // Operands map to inputs by block argument number.
  for (Value v : op.getOperands())
    in.push_back("in" + std::to_string(cast<BlockArgument>(v).getArgNumber()));
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    out.push_back("out" + std::to_string(i));

  std::string bodyText, uniformText;
  llvm::raw_string_ostream bodyOs(bodyText), uniformOs(uniformText);
  BodyContext ctx{bodyOs, globals, in, out, kname, target, &uniformOs};
  // A slice or concat whose packets each copy contiguous elements moves
  // them 16 bytes at a time where the target packs: one item per packet.
  // So does an AdamW update, 4 elements an item.
  // Where the target copies runs instead, one item per contiguous run.
  int64_t n = workItems(&op);
  int packet = 1;
  int64_t run = 1;
  if (target.packsElementwise() && isa<SliceOp, ConcatOp>(op))
    packet = packedCopyWidth(&op);
  else if (target.packsElementwise())
    packet = packedAdamWWidth(&op, n);
  else if (target.copiesRuns() && isa<SliceOp, TransposeOp, ConcatOp>(op))
    run = copyRunElements(&op);
  if (run > 1) {
    if (failed(emitRunCopyBody(&op, run, ctx)))
      return failure();
    n /= run;
  } else if (packet > 1) {
    if (failed(isa<AdamWOp>(op) ? emitPackedAdamWBody(&op, packet, ctx)
                                : emitPackedCopyBody(&op, packet, ctx)))
      return failure();
    n /= packet;
  } else if (failed(emitBody(&op, ctx))) {
    return failure();
  }

  std::string def;
  llvm::raw_string_ostream defOs(def);
  defOs << "(int64_t items";
  for (const std::string &p : params)
    defOs << ", " << p;
  defOs << ") {\n" << uniformText << loopHead(run) << bodyText << "  }\n}\n\n";
  emitLaunch(def, n, args, nodeName(op.getLoc()),
             op.getName().getStringRef());
  return success();
}

void ProgramEmitter::kernelArguments(otck::KernelOp k,
                                     SmallVectorImpl<std::string> &params,
                                     SmallVectorImpl<std::string> &args) {
  for (auto [i, v] : llvm::enumerate(k.getInputs())) {
    auto t = cast<MemRefType>(v.getType());
    params.push_back("const " + cTypeOf(t.getElementType()) + " *in" +
                     std::to_string(i));
    args.push_back(names[v]);
  }
  for (auto [i, v] : llvm::enumerate(k.getOutputs())) {
    auto t = cast<MemRefType>(v.getType());
    params.push_back(cTypeOf(t.getElementType()) + " *out" + std::to_string(i));
    args.push_back(names[v]);
  }
}

std::string ProgramEmitter::loopHead(int64_t itemElements) const {
  return target.loopHead(itemElements);
}

void ProgramEmitter::emitLaunch(const std::string &def, int64_t n,
                                ArrayRef<std::string> args, StringRef node,
                                StringRef what, int width) {
  std::string kname = "k" + std::to_string(kernelCount);
  // Identical kernel texts are emitted once.
  auto [it, fresh] = kernelByText.try_emplace(def, kname);
  if (fresh) {
    ++kernelCount;
    kernels << "// " << what << (node.empty() ? "" : " from node ") << node
            << "\n"
            << target.kernelQualifier() << kname << def;
  } else {
    kname = it->second;
  }
  // A vectorized chain's grid is sized by its packets (width elements each),
  // not its elements: no blocks without work.
  if (width > 1)
    funcs << "  OTC_CALL(" << cString(traceName(node, what))
          << ", OTC_LAUNCH_PACKETS(" << kname << ", " << n << ", " << width;
  else
    funcs << "  OTC_CALL(" << cString(traceName(node, what)) << ", OTC_LAUNCH("
          << kname << ", " << n;
  for (const std::string &a : args)
    funcs << ", " << a;
  funcs << "));\n";
}

/// A chain of elementwise ops in one kernel (otc-fuse-elementwise): every
/// input's element read into a local first (so an output may be written over
/// an input of its shape), then each op's value into a local of its element
/// type (a BF16 value rounds as a store would), then the outputs stored.
LogicalResult ProgramEmitter::emitElementwiseChain(otck::KernelOp k) {
  Block &body = k.getBody().front();
  auto yield = cast<otck::YieldOp>(body.getTerminator());
  ArrayRef<int64_t> domain =
      cast<MemRefType>(k.getOutputs()[0].getType()).getShape();
  int64_t n = 1;
  for (int64_t d : domain)
    n *= d;
  SmallVector<std::string> params, args;
  kernelArguments(k, params, args);

  // The computation of one element: each used input read by `load` (input
  // number, local name, C type), each op's value into a local of its type,
  // each output written by `store` (output number, value).
  auto emitElement =
      [&](raw_ostream &os, StringRef indent,
          function_ref<void(unsigned, StringRef, StringRef)> load,
          function_ref<void(unsigned, StringRef)> store) {
        DenseMap<Value, std::string> local;
        for (auto [i, v] : llvm::enumerate(k.getInputs())) {
          BlockArgument arg = body.getArgument(i);
          if (arg.use_empty())
            continue;
          std::string name = "x" + std::to_string(i);
          load(i, name,
               cTypeOf(cast<MemRefType>(v.getType()).getElementType()));
          local[arg] = name;
        }
        unsigned j = 0;
        for (Operation &op : body.without_terminator()) {
          SmallVector<std::string> operands;
          for (Value v : op.getOperands())
            operands.push_back(local.lookup(v));
          std::string prefix = "t" + std::to_string(j) + "_";
          std::string value = printScalarExpr(
              os, cast<ScalarExpressionOpInterface>(op).getScalarExpression(),
              operands, indent, prefix);
          Type et =
              cast<RankedTensorType>(op.getResult(0).getType()).getElementType();
          std::string ct = cTypeOf(et), name = "v" + std::to_string(j++);
          os << indent << "const " << ct << " " << name << " = (" << ct
             << ")(" << value << ");\n";
          local[op.getResult(0)] = name;
        }
        for (unsigned i = 0; i < k.getOutputs().size(); ++i)
          store(i, local.lookup(yield.getValues()[i]));
      };

  // Element by element: inputs of another shape read through their
  // broadcast index.
  std::string scalarText;
  llvm::raw_string_ostream scalar(scalarText);
  emitElement(
      scalar, "    ",
      [&](unsigned i, StringRef name, StringRef ct) {
        auto t = cast<MemRefType>(k.getInputs()[i].getType());
        std::string index = "i";
        if (t.getShape() != domain) {
          index = ("i" + name).str();
          emitBroadcastIndex(scalar, index, t.getShape(), domain);
        }
        scalar << "    const " << ct << " " << name << " = in" << i << "["
               << index << "];\n";
      },
      [&](unsigned i, StringRef value) {
        scalar << "    out" << i << "[i] = " << value << ";\n";
      });

  // On cuda, 16 bytes per load and store where the buffers allow it
  // (Launches.h: chainVectorWidth).
  const int width = target.packsElementwise() ? chainVectorWidth(k) : 1;
  const bool vector = width > 1;

  std::string def;
  llvm::raw_string_ostream defOs(def);
  defOs << "(int64_t items";
  for (const std::string &p : params)
    defOs << ", " << p;
  defOs << ") {\n";
  if (!vector) {
    defOs << loopHead() << scalarText << "  }\n}\n\n";
  } else {
    auto vecType = [&](Value v) {
      bool bf16 = cast<MemRefType>(v.getType()).getElementType().isBF16();
      return bf16 && width == 4 ? "uint2" : "uint4";
    };
    auto unionDecl = [&](Value v, StringRef name) {
      std::string ct = cTypeOf(cast<MemRefType>(v.getType()).getElementType());
      return ("    union { " + Twine(vecType(v)) + " v; " + ct + " e[" +
              Twine(width) + "]; } " + name + ";\n")
          .str();
    };
    defOs << "  const int64_t vecs = items / " << width << ";\n"
          << "  const int64_t stride = (int64_t)gridDim.x * blockDim.x;\n"
          << "  for (int64_t w = blockIdx.x * (int64_t)blockDim.x + "
             "threadIdx.x; w < vecs; w += stride) {\n";
    for (auto [i, v] : llvm::enumerate(k.getInputs())) {
      if (body.getArgument(i).use_empty())
        continue;
      std::string a = "a" + std::to_string(i);
      defOs << unionDecl(v, a) << "    " << a << ".v = reinterpret_cast<const "
            << vecType(v) << " *>(in" << i << ")[w];\n";
    }
    for (auto [i, v] : llvm::enumerate(k.getOutputs()))
      defOs << unionDecl(v, "r" + std::to_string(i));
    defOs << "#pragma unroll\n    for (int e = 0; e < " << width
          << "; ++e) {\n";
    emitElement(
        defOs, "      ",
        [&](unsigned i, StringRef name, StringRef ct) {
          defOs << "      const " << ct << " " << name << " = a" << i
                << ".e[e];\n";
        },
        [&](unsigned i, StringRef value) {
          defOs << "      r" << i << ".e[e] = " << value << ";\n";
        });
    defOs << "    }\n";
    for (auto [i, v] : llvm::enumerate(k.getOutputs()))
      defOs << "    reinterpret_cast<" << vecType(v) << " *>(out" << i
            << ")[w] = r" << i << ".v;\n";
    defOs << "  }\n"
          << "  for (int64_t i = vecs * " << width
          << " + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < items; "
             "i += stride) {\n"
          << scalarText << "  }\n}\n\n";
  }
  // A single op is named as every single-op kernel; a chain after the node
  // of its last op and its ops in order (Launches.h: kernelTraceName).
  std::string node, what;
  if (llvm::hasSingleElement(body.without_terminator())) {
    node = nodeName(body.front().getLoc());
    what = body.front().getName().getStringRef().str();
  } else {
    std::tie(node, what) = chainNodeAndWhat(k);
  }
  emitLaunch(def, n, args, node, what, width);
  return success();
}

/// What a pointer to `buffer`'s elements points to, as the kernel library's
/// signatures name it (codegen/KernelAbi.h).
static std::string bufferPointee(Value buffer) {
  Type t = cast<MemRefType>(buffer.getType()).getElementType();
  if (t.isF32())
    return "float";
  if (t.isBF16())
    return "otcrt_bf16";
  if (t.isF64())
    return "double";
  if (t.isInteger(64))
    return "int64_t";
  if (t.isInteger(32))
    return "int32_t";
  if (t.isInteger(8))
    return "uint8_t";
  std::string text;
  llvm::raw_string_ostream os(text);
  t.print(os);
  return text;
}

/// A call of the runtime's kernel library (runtime/include/otcrt/kernels.h)
/// with the arguments the op lists: scalars as literals, operands and results
/// as their buffers (BF16 ones as otcrt_bf16), a struct as a local constant
/// passed by address, then the stream (the runtime's on the cuda target,
/// nullptr on the cpu target). A non-zero status
/// stops the program with the kernel's and the node's names.
LogicalResult ProgramEmitter::emitLibraryCall(otck::KernelOp k,
                                              LibraryCallOpInterface lib) {
  Operation *op = lib.getOperation();
  auto pointer = [&](Value buffer, int64_t offset) {
    auto t = cast<MemRefType>(buffer.getType());
    std::string name = names[buffer];
    std::string p =
        t.getElementType().isBF16() ? "(otcrt_bf16 *)" + name : name;
    return offset ? "(" + p + " + " + std::to_string(offset) + ")" : p;
  };
  std::string decls;
  unsigned structs = 0;
  std::function<std::string(const LibraryArg &)> print =
      [&](const LibraryArg &a) -> std::string {
    switch (a.kind) {
    case LibraryArg::Int:
      return std::to_string(a.value);
    case LibraryArg::Float:
      return floatLiteral(a.real);
    case LibraryArg::Null:
      return "nullptr";
    case LibraryArg::Operand: {
      auto arg = cast<BlockArgument>(op->getOperand(a.index));
      return pointer(k.getInputs()[arg.getArgNumber()], a.offset);
    }
    case LibraryArg::Result:
      return pointer(k.getOutputs()[a.index], a.offset);
    case LibraryArg::Struct: {
      std::string name = "s" + std::to_string(structs++);
      SmallVector<std::string> fields;
      for (const LibraryArg &f : a.fields)
        fields.push_back(print(f));
      decls += "    const " + a.structType + " " + name + " = {" +
               llvm::join(fields, ", ") + "};\n";
      return "&" + name;
    }
    }
    llvm_unreachable("unknown library argument");
  };
  // A result the call adds into is written over its accumulator.
  SmallVector<std::pair<unsigned, unsigned>> accumulated;
  lib.getAccumulatedResults(accumulated);
  for (auto [result, operand] : accumulated) {
    auto arg = cast<BlockArgument>(op->getOperand(operand));
    if (k.getInputs()[arg.getArgNumber()] != k.getOutputs()[result])
      return op->emitError("result ")
             << result << " adds into operand " << operand
             << " and must be written over its buffer";
  }
  SmallVector<LibraryArg> libArgs;
  lib.getLibraryArgs(libArgs);
  SmallVector<std::string> args;
  for (const LibraryArg &a : libArgs)
    args.push_back(print(a));
  args.push_back(target.streamArgument().str());

  std::string kernel = lib.getLibraryKernel();
  // The call as the kernel library declares it (otcrt/kernels.def).
  SmallVector<KernelArg> abiArgs;
  for (const LibraryArg &a : libArgs) {
    switch (a.kind) {
    case LibraryArg::Int:
      abiArgs.push_back(KernelArg::integer(a.value));
      break;
    case LibraryArg::Float:
      abiArgs.push_back(KernelArg::floating());
      break;
    case LibraryArg::Null:
      abiArgs.push_back(KernelArg::null());
      break;
    case LibraryArg::Operand: {
      auto arg = cast<BlockArgument>(op->getOperand(a.index));
      abiArgs.push_back(
          KernelArg::pointer(bufferPointee(k.getInputs()[arg.getArgNumber()])));
      break;
    }
    case LibraryArg::Result:
      abiArgs.push_back(
          KernelArg::pointer(bufferPointee(k.getOutputs()[a.index])));
      break;
    case LibraryArg::Struct:
      abiArgs.push_back(KernelArg::pointer(a.structType));
      break;
    }
  }
  abiArgs.push_back(KernelArg::pointer("void"));
  if (std::string wrong = checkKernelCall(kernel, abiArgs); !wrong.empty())
    return op->emitError("the kernel library call differs from its "
                         "signature: ")
           << wrong;
  std::string node = nodeName(op->getLoc());
  std::string opName = op->getName().getStringRef().str();
  std::string call;
  llvm::raw_string_ostream callOs(call);
  callOs << "OTC_CALL(" << cString(traceName(node, opName)) << ", OTC_LIB("
         << kernel;
  for (const std::string &a : args)
    callOs << ", " << a;
  callOs << "));";
  if (decls.empty())
    funcs << "  " << call << "\n";
  else
    funcs << "  {\n" << decls << "    " << call << "\n  }\n";
  return success();
}

/// An otcrt_gemm call (otcrt_gemm_fp8 for an FP8 GEMM, its operands'
/// formats after the descriptor): its descriptor as a static constant in a
/// block of its own, then the call, whose non-zero status stops the program
/// naming the node, as for the kernel library.
LogicalResult ProgramEmitter::emitGemm(otck::GemmOp g) {
  FailureOr<std::optional<GemmCall>> call =
      gemmCall(g, [&](Value v) -> std::string { return names[v]; });
  if (failed(call))
    return failure();
  if (!*call)
    return success();
  // An FP8 GEMM passes its operands' formats after the descriptor, and
  // then, reading FP8 copies (otc-fp8-copies), each copy and its layouts.
  const auto &fp8 = (*call)->fp8;
  const auto &copies = (*call)->copies;
  const char *function = copies ? "otcrt_gemm_fp8_copies"
                         : fp8  ? "otcrt_gemm_fp8"
                                : "otcrt_gemm";
  SmallVector<KernelArg> abiArgs = {KernelArg::pointer("OtcrtGemm")};
  std::string formats;
  if (fp8) {
    abiArgs.push_back(KernelArg::integer(fp8->first));
    abiArgs.push_back(KernelArg::integer(fp8->second));
    formats =
        std::to_string(fp8->first) + ", " + std::to_string(fp8->second) + ", ";
  }
  if (copies) {
    for (auto [copy, layouts] :
         {std::make_pair(g.getLhsFp8(), copies->first),
          std::make_pair(g.getRhsFp8(), copies->second)}) {
      abiArgs.push_back(KernelArg::pointer(bufferPointee(copy)));
      abiArgs.push_back(KernelArg::integer(layouts));
      formats += names[copy] + ", " + std::to_string(layouts) + ", ";
    }
  }
  for (Value v : (*call)->buffers)
    abiArgs.push_back(v ? KernelArg::pointer(bufferPointee(v))
                        : KernelArg::null());
  abiArgs.push_back(KernelArg::pointer("void"));
  if (std::string wrong = checkKernelCall(function, abiArgs); !wrong.empty())
    return g.emitError("the GEMM call differs from its signature: ") << wrong;
  funcs << "  {\n    static const OtcrtGemm g = " << (*call)->descriptor
        << ";\n    OTC_CALL(" << cString(gemmTraceName(g)) << ", OTC_LIB("
        << function << ", &g, " << formats << (*call)->operands << ", "
        << target.streamArgument() << "));\n  }\n";
  return success();
}

/// An otcrt_fp8_quantize call: the copy's descriptor (the source as a
/// row-major matrix of its last dimension's columns, the format and the
/// layouts) as a static constant, the call site its delayed amax belongs
/// to, then the call.
LogicalResult ProgramEmitter::emitFp8Quantize(otck::Fp8QuantizeOp q) {
  MemRefType source = q.getSource().getType();
  int64_t cols = source.getShape().back();
  int64_t rows = cols ? source.getNumElements() / cols : 0;
  std::optional<Fp8Format> format = parseFp8Format(q.getFormat());
  if (!format)
    return q.emitOpError("has no FP8 format");
  SmallVector<KernelArg> abiArgs = {
      KernelArg::pointer("OtcrtFp8Quantize"),
      KernelArg::pointer(bufferPointee(q.getSource())),
      KernelArg::pointer(bufferPointee(q.getCopy())),
      KernelArg::pointer("void")};
  if (std::string wrong = checkKernelCall("otcrt_fp8_quantize", abiArgs);
      !wrong.empty())
    return q.emitError("the FP8 quantize call differs from its signature: ")
           << wrong;
  funcs << "  {\n    static const OtcrtFp8Quantize q = {" << rows << ", "
        << cols << ", " << (*format == Fp8Format::E4M3 ? 0 : 1) << ", "
        << q.getLayouts() << "};\n    OTC_CALL("
        << cString(fp8QuantizeTraceName(q))
        << ", OTC_LIB(otcrt_fp8_quantize, &q, " << names[q.getSource()] << ", "
        << names[q.getCopy()] << ", " << target.streamArgument()
        << "));\n  }\n";
  return success();
}

void ProgramEmitter::emitCopy(otck::CopyOp c) {
  MemRefType t = c.getSource().getType();
  int64_t bytes = byteSize(t);
  target.emitCopy(funcs, names[c.getTarget()], names[c.getSource()], bytes);
}

} // namespace

LogicalResult otc::emitProgram(ModuleOp module, const EmitOptions &options,
                               raw_ostream &os) {
  FailureOr<ConfigAttr> config = requireConfig(module, "the emitter");
  if (failed(config))
    return failure();
  const Target *target = lookupTarget(config->getTarget());
  if (!target)
    return module.emitError("no target '") << config->getTarget() << "'";
  ProgramEmitter emitter(options, *config, *target);
  return emitter.emit(module, os);
}
