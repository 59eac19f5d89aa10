//===- Importer.h - the ONNX importer's internals ----------------*- C++
//-*-===//
//
// Private to frontend/: the Importer class that builds `@forward` from an
// ONNX ModelProto, and the helpers its files share. The importer is split by
// concern: ModelReader.cpp (file, header, checker, tensor data), GraphWalk.cpp
// (pre-scan, arguments, values, errors, attributes), OnnxImporter.cpp (the op
// table and the driver), and one file per op family (ElementwiseOps.cpp,
// LinalgOps.cpp, ShapeOps.cpp, NormalizationOps.cpp, ConstantOps.cpp).
//
// Errors are thrown as ImportError from the importer's own code (never from
// MLIR callbacks) and turned into the one-line message by importOnnxModel.
// Ops are built with `createOrFold`, so shape computations on constants
// become `otc.constant`s as soon as they are imported (see ir/OtcFolds.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_FRONTEND_IMPORTER_H
#define OTC_FRONTEND_IMPORTER_H

#include "frontend/OnnxImporter.h"
#include "ir/NameRegex.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include "onnx/onnx_pb.h"

#include <array>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace otc {
namespace detail {

/// The default-domain opsets the importer knows the op semantics of.
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 23;
/// The oldest default-domain opset read: older models, from this one on, are
/// upgraded to kMinOpset by libonnx's version converter (VersionConvert.cpp).
constexpr int64_t kOldestOpset = 7;
/// The newest default-domain opset libonnx 1.12's checker knows.
constexpr int64_t kMaxCheckerOpset = 17;

/// The largest tensor the importer accepts, in bytes: 1 TiB, beyond the
/// memory of any device the programs run on. Bounding every tensor up front
/// keeps element counts and byte sizes far from int64 overflow.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 40;
/// The largest value a node computes at run time, in bytes: 1 PiB. Such a
/// value holds no memory at import, and fusion may replace it (a mixture of
/// experts' weights gathered per token, [tokens x top-k, F, C], which
/// otc.expert_matmul never builds: 2 TiB for OLMoE at micro-batch 8 of
/// 2048 tokens); one that survives is the plan's to size. Still far from
/// int64 overflow in byte counts.
constexpr uint64_t kMaxComputedTensorBytes = uint64_t(1) << 50;

/// The most elements of a Range computed at import time (its values are
/// materialized as a constant), and of the offsets GatherND/GatherElements
/// compute at import.
constexpr int64_t kMaxImportRange = int64_t(1) << 24;

/// The most elements of a sequence (SplitToSequence pieces, one value each).
constexpr int64_t kMaxSequenceLength = int64_t(1) << 16;

/// An import failure; its message is the final one-line error.
class ImportError : public std::runtime_error {
public:
  explicit ImportError(const std::string &msg) : std::runtime_error(msg) {}
};

/// Throws an ImportError carrying `msg`.
[[noreturn]] void fail(const llvm::Twine &msg);
/// The element count of `shape`, overflow-checked; fails naming `what` when a
/// dimension is negative or the tensor (at `elemBytes` bytes per element)
/// exceeds `limit` bytes.
int64_t checkedElements(llvm::ArrayRef<int64_t> shape, uint64_t elemBytes,
                        const llvm::Twine &what,
                        uint64_t limit = kMaxTensorBytes);
/// Formats a shape as `[4, 3]`.
std::string shapeStr(llvm::ArrayRef<int64_t> shape);
/// Prints a type, e.g. `tensor<2x3xi64>`.
std::string typeStr(mlir::Type type);
/// Makes a possibly multi-line message fit on one line.
std::string oneLine(llvm::StringRef msg);
/// Name of an ONNX tensor element type, e.g. "FLOAT16".
std::string dataTypeName(int32_t type);
/// Widens a float read from the model to the double with the same shortest
/// decimal form (0.1f becomes 0.1, not 0.10000000149011612).
double widenFloat(float v);

/// The element kinds the importer represents; every float type becomes f32.
enum class Kind { F32, I64, I32, I1 };
/// Maps an ONNX element type to the kind it is imported as, if supported.
std::optional<Kind> kindOf(int32_t type);
/// The MLIR element type of a kind.
mlir::Type elementType(mlir::MLIRContext *ctx, Kind kind);

/// Trained float initializers of at least this many elements keep no values
/// in an import that hands none out (--plan-only, --fit): the rules and the
/// tie key read them once, and the tensor is dropped (a parameter by the
/// exporter's graph signature is not read at all). The environment variable
/// OTC_TEST_VALUELESS_ELEMENTS sets another size (a test hook: small models
/// take the same path).
size_t valuelessElements();

/// The decoded contents of an ONNX tensor (initializer or Constant value).
/// Float kinds use `floats`, the others `ints`.
struct TensorData {
  Kind kind = Kind::F32;
  llvm::SmallVector<int64_t> shape;
  std::vector<float> floats;
  std::vector<int64_t> ints;
};

/// Builds the dense attribute holding `t`.
mlir::DenseElementsAttr toAttr(mlir::MLIRContext *ctx, const TensorData &t);

/// Reads and parses the model file at `path`.
void loadModel(const std::string &path, onnx::ModelProto &model);
/// Checks ir_version, opset and graph; returns the default-domain opset.
int64_t checkHeader(const std::string &path, const onnx::ModelProto &model);
/// Upgrades a model at an opset older than kMinOpset to kMinOpset with
/// libonnx's version converter; returns the model's opset afterwards. The
/// dimensions that `options` binds are fixed in the graph inputs first.
int64_t upgradeOpset(const std::string &path, onnx::ModelProto &model,
                     int64_t opset, const ImportOptions &options);
/// Gives each module its own copy of an initializer the exporter merged from
/// several parameters of equal values (MergedParams.cpp); returns (copy,
/// original) name pairs.
std::vector<std::pair<std::string, std::string>>
splitMergedParams(onnx::ModelProto &model, const std::string &path);
/// Rewrites each masked_scatter as the dynamo exporter writes it (ScatterND
/// at the NonZero of a mask) into static shapes: a gather at the mask's
/// cumulative count (MaskedScatter.cpp). Returns how many.
int rewriteMaskedScatter(onnx::GraphProto &graph);
/// The value of the node's metadata entry `key` (NodeProto.metadata_props,
/// which libonnx 1.12 keeps as an unknown field), or "".
std::string nodeMetadata(const onnx::NodeProto &node, const std::string &key);
/// Sets (replaces) the node's metadata entry `key`; erases it.
void setNodeMetadata(onnx::NodeProto &node, const std::string &key,
                     const std::string &value);
void eraseNodeMetadata(onnx::NodeProto &node, const std::string &key);
/// The TorchScript exporter's scope of `node` as a module path
/// (`/model/layers.0/mlp/MatMul` -> `model.layers.0.mlp`), or "".
std::string scopePath(const onnx::NodeProto &node);
/// Notes on each TorchScript node the module path its scope stands for
/// where the scopes lack levels (a peft model's LoraModel, lora_A / lora_B:
/// TorchScriptScopes.cpp); splitMergedParams does it first.
void canonicalizeScopes(onnx::GraphProto &graph);
/// The path canonicalizeScopes noted on `node`, or "".
std::string canonicalScope(const onnx::NodeProto &node);
/// Erases those notes (before the graph is written out).
void forgetCanonicalScopes(onnx::GraphProto &graph);
/// The same for a ValueInfoProto's metadata_props.
std::string valueMetadata(const onnx::ValueInfoProto &info,
                          const std::string &key);
/// The module a node came from: the dynamo exporter's "namespace" metadata
/// (`model.layers.0.input_layernorm`), else the TorchScript exporter's scope
/// name (`/model/layers.0/input_layernorm/Mul_1`), else "".
std::string moduleOf(const onnx::NodeProto &node);
/// Whether `node` reads input `j` as a projection weight [in, out] (MatMul's
/// B; Gemm's B without transB).
bool projectionWeight(const onnx::NodeProto &node, int j);
/// The state-dict name of a Linear's Wᵀ the TorchScript exporter folded
/// (`onnx::MatMul_N`): `<module>.weight` when every reader (node index,
/// input index) reads it as a projection weight in one module's scope
/// (`/model/layers.0/self_attn/q_proj/MatMul`), else "".
std::string
foldedProjectionName(const onnx::GraphProto &graph, const std::string &name,
                     const std::vector<std::pair<int, int>> &readers);
/// The module scopes (moduleOf) of `readers`' nodes (node index, input
/// index).
std::set<std::string>
readerModules(const onnx::GraphProto &graph,
              const std::vector<std::pair<int, int>> &readers);
/// `<module>.weight` when every reader (node index, input index) lies in
/// one module's scope, else "": the name a value the TorchScript exporter
/// folded from that module's parameter most likely has.
std::string scopeWeightName(const onnx::GraphProto &graph,
                            const std::vector<std::pair<int, int>> &readers);
/// The parameters of the module torch.export traced (the state-dict names of
/// its graph signature's PARAMETER inputs, which the dynamo exporter keeps in
/// the graph's metadata), or none for an export without that record.
std::optional<std::set<std::string>>
exportedParameters(const onnx::GraphProto &graph);
/// The range torch.export allows a symbolic dimension (low and high; none
/// for an unbounded end).
struct DimRange {
  std::optional<int64_t> low, high;
};
/// The dynamo exporter's range_constraints by the graph inputs' dim_params
/// (`seq` -> [0, 4096] for torch.export.Dim("seq", max=4096)); empty for an
/// export without the record or one whose symbols cannot be matched.
std::map<std::string, DimRange>
exportedDimRanges(const onnx::GraphProto &graph);
/// For each value the dynamo exporter's optimizer folded, what it was folded
/// from (its value_info's `pkg.onnxscript.optimizer.folded_from`).
std::map<std::string, std::vector<std::string>>
foldedFromAll(const onnx::GraphProto &graph);
/// Whether fewer than half the elements of `v`, and fewer than 256, are
/// distinct: ones, zeros or an identity, not random or trained weights; reads
/// a few hundred elements of a random tensor (Ties.cpp).
bool fewDistinct(const std::vector<float> &v);
/// Runs the ONNX checker when libonnx knows `opset`.
void runChecker(const std::string &path, int64_t opset);
/// Decodes a tensor (raw, typed or external data relative to `modelPath`);
/// `what` names it in errors.
TensorData decodeTensor(const onnx::TensorProto &t, const llvm::Twine &what,
                        const std::string &modelPath);
/// A large float initializer's tie key, and whether all its values are
/// finite (a mask's -inf is not), read a chunk at a time and none kept.
struct StreamedKey {
  TieKey key;
  bool finite = true;
  float first = 0, last = 0; ///< its first and last values
};
/// The StreamedKey of a float initializer of external data with at least
/// valuelessElements() elements, which an exporter reads again when it
/// writes it; none for another tensor (read it whole).
std::optional<StreamedKey> keyWithoutValues(const onnx::TensorProto &t,
                                            const std::string &what,
                                            const std::string &modelPath);
/// Calls `visit` with the values of a float tensor (any float type; raw,
/// typed or external data), converted to float32: an external tensor a few
/// megabytes at a time, never held whole; another in one call.
void forEachFloatChunk(const onnx::TensorProto &t, const llvm::Twine &what,
                       const std::string &modelPath,
                       llvm::function_ref<void(const float *, size_t)> visit);
/// Elements first, first + stride, ... (`count` of them) of a float32
/// tensor (raw, typed or external data), reading only their bytes of an
/// external file (resolved and opened once).
std::vector<float> readFloatRange(const onnx::TensorProto &t,
                                  const llvm::Twine &what,
                                  const std::string &modelPath, int64_t first,
                                  int64_t count, int64_t stride = 1);
/// Whether an EXTERNAL tensor's bytes are wholly a hole of a sparse file
/// (zeros that were never written: a file made to size a model), asked of
/// the file system (SEEK_DATA) without reading them; false for other data.
bool externalHole(const onnx::TensorProto &t, const llvm::Twine &what,
                  const std::string &modelPath);
/// The bytes of an EXTERNAL tensor, read from the file its `location` names
/// relative to `modelPath` (offset and length checked against it).
std::string externalBytes(const onnx::TensorProto &t, const llvm::Twine &what,
                          const std::string &modelPath);

/// Per-node facts computed before building: its display name.
struct NodeInfo {
  const onnx::NodeProto *proto;
  std::string name;
};

/// A constant known at import time (an initializer that is not a parameter,
/// or a Constant node output), materialized as an otc.constant on first use.
struct StaticValue {
  mlir::DenseElementsAttr attr;
  mlir::Location loc;
  mlir::Value materialized;
};

/// What an import without values learned of a large trained initializer
/// (addParams): the import rules' verdict and its tie key. A loaded model
/// keeps them, so that its later imports (one per micro-batch for --fit)
/// read none of those values again.
struct CachedInitializer {
  std::string reason;
  TieKey key;
};
using InitializerCache = std::map<std::string, CachedInitializer>;

/// Which module parameter each initializer of a dynamo export is
/// (addParams): the exporter's record of the parameters (none for other
/// exports), what each value was folded from, and the copies
/// splitMergedParams made; `reached` collects the parameters some
/// initializer is, or was folded from or split from.
struct ParamOrigins {
  std::optional<std::set<std::string>> exported;
  std::map<std::string, std::vector<std::string>> folded;
  const std::vector<std::pair<std::string, std::string>> *splits = nullptr;
  std::set<std::string> reached;
  /// The parameter initializer `name` is (itself, what it was folded from,
  /// or what it is a split copy of), or none; what it names is reached.
  std::optional<std::string> parameterOf(const std::string &name);
  /// Whether `name` is a module parameter (always, without the record).
  bool fromParameter(const std::string &name) {
    return !exported || parameterOf(name).has_value();
  }
};

/// A float initializer that may be trained (addParams), its values (none
/// when an import that keeps no values left them unread: its tie key
/// instead) and, when the import rules make it a constant, why.
struct ParamCandidate {
  const onnx::TensorProto *init;
  TensorData data;
  bool forced = false;
  std::string reason;
  std::optional<TieKey> key;
  /// Decided from its first values and keyed by its diagonal
  /// (Importer::isSampled): a build checks the rest when it reads them.
  bool sampled = false;
};

/// A Conv's geometry: spatial rank, groups, kernel, strides, dilations,
/// pads (begins, then ends) and the output's spatial sizes.
struct ConvGeometry {
  int64_t rank = 0, groups = 1;
  llvm::SmallVector<int64_t> kernel, strides, dil, pads, outSp;
};

/// An Einsum node's operands, their letters (`...` expanded), each
/// letter's size and the output's letters (EinsumOp.cpp).
struct EinsumTerms {
  llvm::SmallVector<mlir::Value> xs;
  llvm::SmallVector<std::string> letters;
  std::map<char, int64_t> size;
  std::string out;
};

/// Builds the otc module for one model.
class Importer {
public:
  /// Imports `model` of the file at `path` (at `opset`, kMinOpset or later;
  /// `fileOpset` as written, for the ONNX checker when `check`), whose
  /// merged parameters splitMergedParams split into `splitParams`.
  Importer(mlir::MLIRContext &ctx, llvm::StringRef path,
           const onnx::ModelProto &model, int64_t opset, int64_t fileOpset,
           bool check,
           std::vector<std::pair<std::string, std::string>> splitParams,
           const ImportOptions &options,
           std::vector<InitializerData> *initializers)
      : ctx(ctx), builder(&ctx), path(path.str()), options(options),
        initializersOut(initializers), model(model), opset(opset),
        fileOpset(fileOpset), check(check),
        splitParams(std::move(splitParams)) {}

  mlir::OwningOpRef<mlir::ModuleOp> run();
  /// Where an import without values keeps and finds what it learned of the
  /// large initializers (a loaded model's, across its imports).
  void setInitializerCache(InitializerCache *c) { cache = c; }

  // One builder per op family, on the current node (the op files).
  void importMatMul();
  void importConv();
  /// A Conv's attributes checked against X's and W's shapes (one line for
  /// each fault), auto_pad applied, and the output's spatial sizes.
  ConvGeometry convGeometry(llvm::ArrayRef<int64_t> xs,
                            llvm::ArrayRef<int64_t> ws);
  /// The rows the product reads, [G, N * positions, C/G * taps] (a patch
  /// embedding's by a reshape and a transpose, any other's gathered).
  mlir::Value convColumns(mlir::Value x, const ConvGeometry &g);
  /// The product of the rows with W, one GEMM per group, as [N, M, O...].
  mlir::Value convProduct(mlir::Value cols, mlir::Value w,
                          const ConvGeometry &g, int64_t n);
  mlir::Value receptiveFields(mlir::Value x, llvm::ArrayRef<int64_t> kernel,
                              llvm::ArrayRef<int64_t> strides,
                              llvm::ArrayRef<int64_t> dil,
                              llvm::ArrayRef<int64_t> pads,
                              llvm::ArrayRef<int64_t> outSp, int64_t groups);
  void importGemm();
  void importBinary();
  void importPow();
  void importCompare();
  void importWhere();
  void importUnary();
  void importGelu();
  void importCast();
  void importCastLike();
  void importSplitToSequence();
  void importSequenceAt();
  void importIdentity();
  void importDropout();
  void importTranspose();
  void importReshape();
  void importFlatten();
  void importUnsqueeze();
  void importSqueeze();
  void importExpand();
  void importConcat();
  void importSplit();
  void importSlice();
  void importGather();
  void importScatterND();
  void importScatterElements();
  void importScatterNDAtRunTime(bool add);
  /// ScatterND's index tuple length k after checking that indices of shape
  /// \p is index \p data and \p updates is indices[:-1] + data[k:] of
  /// data's element type.
  int64_t scatterNDTupleSize(mlir::Value data, mlir::Value updates,
                             llvm::ArrayRef<int64_t> is);
  /// Fails on a known index of GatherElements or ScatterElements outside
  /// [-size, size) along `axis`; for indices read from a graph input, notes
  /// the bound in the module's otc.index_bounds (what `train` checks).
  void checkElementIndices(mlir::Value indices, int64_t size, int64_t axis);
  /// GatherElements' and ScatterElements' flat offsets into data of shape
  /// \p ds: element i of \p indices (int64, indices' rank = data's) at
  /// base(i) + indices[i] * stride(axis), base(i) the offset of i's other
  /// coordinates (negative indices counted from the end). \p what names
  /// the constant for the size check.
  mlir::Value elementOffsets(mlir::Value indices, llvm::ArrayRef<int64_t> ds,
                             int64_t axis, llvm::StringRef what);
  /// A scatter of \p updates ([M, slice] or [M] with slice 1) into \p data
  /// viewed as [rows, slice] at the run-time row indices \p rows ([M],
  /// int64, in range): their sum into the rows for reduction "add", else
  /// their value replacing the rows (ONNX leaves repeated indices
  /// undefined: they are summed). Returns data's shape.
  mlir::Value scatterRows(mlir::Value data, mlir::Value updates,
                          mlir::Value rows, int64_t slice, bool add);
  void importTrilu();
  void importSoftmax();
  void importReduce();
  void importLayerNorm();
  void importSoftmaxCrossEntropy();
  void importNllLoss();
  void importConstant();
  void importShape();
  void importSize();
  void importConstantOfShape();
  void importRange();
  void importLogic();
  void importIsNan();
  void importMinMax();
  /// Einsum of one or two operands (EinsumOp.cpp): einsumTerms parses and
  /// checks the node (einsumLetters expands a term's `...` for an operand
  /// of `rank`), sumOutLoneLetters sums out what one operand alone has,
  /// einsumProduct contracts two operands (`letters`: its result's).
  void importEinsum();
  EinsumTerms einsumTerms();
  std::string einsumLetters(std::string term, int64_t rank, int64_t &ellipsis);
  void sumOutLoneLetters(EinsumTerms &t);
  mlir::Value einsumProduct(const EinsumTerms &t, std::string &letters);
  /// `x` (dimensions named by `from`) transposed to the order of `to`.
  mlir::Value transposeLetters(mlir::Value x, const std::string &from,
                               const std::string &to);
  /// AveragePool whose windows tile the input (LinalgOps.cpp).
  void importAveragePool();
  /// Clip, Softplus, Floor / Ceil and Mod as primitives (RoundingOps.cpp).
  void importClip();
  void importSoftplus();
  void importFloorCeil();
  void importMod();
  /// log(1 + u) for u >= 0, precise where 1 + u rounds.
  mlir::Value log1p(mlir::Value u);
  /// trunc(x) of a float tensor (through int64).
  mlir::Value truncFloat(mlir::Value x);
  void importCumSum();
  void importGatherND();
  void importGatherElements();
  void importTopK();
  /// The indices of the `k` largest (or, not `largest`, smallest) values
  /// of float `x` along `axis`, sorted, ties by the lower index, [..., k,
  /// ...]; with `values`, their values too (a gather of x, through which
  /// their gradient reaches x).
  mlir::Value topK(mlir::Value x, int64_t axis, int64_t k, bool largest,
                   mlir::Value *values);
  void importArgMax();
  void importOneHot();
  void importTile();
  void importPad();
  void importRmsNorm();
  void importAttention();
  /// Refuses what importAttention does not take (outputs past Y, a
  /// key/value cache, qk_matmul_output_mode).
  void checkAttentionNode();
  /// Q, K and V as [B, H, T, D] (3-D inputs split into heads), K and V
  /// repeated to H heads; their shapes checked.
  std::array<mlir::Value, 3> attentionHeads(mlir::Value q, mlir::Value k,
                                            mlir::Value v);
  /// The scores under is_causal (a select) and attn_mask (added; a boolean
  /// one as 0 and -inf).
  mlir::Value maskedScores(mlir::Value scores, mlir::Value mask);
  void importRotaryEmbedding();
  /// `x` transposed by `perm` (Opset23Ops.cpp).
  mlir::Value transposeTo(mlir::Value x, llvm::ArrayRef<int64_t> perm);
  /// The element count of `shape` for a constant the importer computes
  /// (`what`, in errors), at most kMaxImportRange.
  int64_t importOffsets(llvm::ArrayRef<int64_t> shape, llvm::StringRef what);
  /// Input `idx` of the current node, an integer tensor, as int64.
  mlir::Value indicesI64(int idx);
  /// `idx` with negative entries counted from the end of an axis of `size`.
  mlir::Value normalizeIndex(mlir::Value idx, int64_t size);
  /// CumSum of a run-time value along `axis` in ops (LogicOps.cpp).
  mlir::Value cumSumOps(mlir::Value x, int64_t axis, bool exclusive,
                        bool reverse);

private:
  /// Names the nodes, rejects unsupported ops and undefined or out-of-order
  /// values, and finds the initializers read only at import time.
  void prescan();
  /// prescan's parts: each node named (`nodes`), every op checked
  /// supported at the model's opset; every value defined before its use,
  /// and the uses recorded (`used`, `staticOnly`, `staticGraphInputs`).
  void nameNodesAndCheckOps();
  void checkOrderAndUses();
  /// What the ONNX checker checks, at every opset (GraphChecks.cpp): every
  /// value assigned once and graph outputs listed once...
  void checkNames();
  /// ... each node's input/output counts and attributes against its schema.
  void checkNodeSchema(const NodeInfo &node);
  /// The current node's input element types against its schema's type
  /// constraints (before it is built).
  void checkInputTypes();
  /// The current node's outputs against kMaxTensorBytes (after it is built).
  void checkOutputs();
  /// Fails naming `what` and `name` when `type` exceeds `limit` bytes.
  void checkSize(const std::string &name, mlir::Type type,
                 const llvm::Twine &what, uint64_t limit = kMaxTensorBytes);
  /// Adds the graph inputs as `otc.input` arguments, binding symbolic dims;
  /// import-time inputs with a value from ImportOptions::inputValue become
  /// constants instead.
  void addInputs();
  /// Fails when symbolic dimension `param` (dimension `index` of `what`)
  /// is bound to a value outside the range the export allows it.
  void checkDimRange(const std::string &what, int index,
                     const std::string &param, int64_t value);
  /// exportedDimRanges of the graph, read by the first checkDimRange.
  std::optional<std::map<std::string, DimRange>> dimRanges;
  /// Makes graph input `in` (of `kind`, declared shape `declared` with -1 for
  /// symbolic dims) the constant `value`; checks type and shape.
  void bindInput(const onnx::ValueInfoProto &in, Kind kind,
                 llvm::ArrayRef<int64_t> declared, const BoundInput &value);
  /// Adds the float initializers as `otc.param` arguments; keeps the others.
  void addParams();
  /// The float initializers that may be trained, read (or, where the import
  /// keeps no values, keyed) in graph order; the others become statics.
  std::vector<ParamCandidate> readParamCandidates(ParamOrigins &origins,
                                                  const NameRegex *train);
  /// The four ways readParamCandidates takes an initializer, tried in this
  /// order; each but the last returns false when it is not its way, having
  /// added nothing. What an earlier import of the same model learned;
  /// a large parameter by the exporter's graph signature, not read; a large
  /// matrix without a signature, sampled; any other, decoded (or a
  /// constant among the statics).
  bool addCachedCandidate(const onnx::TensorProto &init, ParamOrigins &origins,
                          bool forced, std::vector<ParamCandidate> &floats);
  bool addSignatureCandidate(const onnx::TensorProto &init,
                             ParamOrigins &origins, bool forced,
                             std::vector<ParamCandidate> &floats);
  bool addSampledCandidate(const onnx::TensorProto &init, ParamOrigins &origins,
                           bool forced, std::vector<ParamCandidate> &floats);
  void addDecodedCandidate(const onnx::TensorProto &init, ParamOrigins &origins,
                           bool forced, std::vector<ParamCandidate> &floats);
  /// Whether a large matrix is keyed by its diagonal (of a graph without
  /// the exporter's signature, in an import that keeps no values, or one
  /// that defers those stored as external data).
  bool isSampled(const onnx::TensorProto &init,
                 const ParamOrigins &origins) const;
  /// The state-dict name of initializer `name` where it is another one's
  /// (what otc-export writes): the parameter the dynamo exporter folded it
  /// from, or the Linear whose Wᵀ the TorchScript exporter folded; "" when
  /// it is its own name or none is known. `guessed`, when given, says
  /// whether the name is a guess from its readers' module scope.
  std::string stateDictNameOf(const std::string &name, ParamOrigins &origins,
                              bool *guessed = nullptr);
  /// Why otc-compile warns of `name`, a trained value the TorchScript
  /// exporter folded, named `guess` after its readers' scope: only
  /// additions read it, so it may be a buffer ("" when others read it).
  std::string additiveFoldWarning(const std::string &name,
                                  const std::string &guess);
  /// Why otc-compile warns of `name`, a trained value the TorchScript
  /// exporter folded (`onnx::Mul_N`), candidate `c`, whose values are few
  /// distinct (a fresh norm's 1 + weight, ones) and which nodes of
  /// several modules read: the exporter merges equal tensors, so it may be
  /// a parameter of each module, trained here as one ("" otherwise).
  std::string mergedFoldWarning(const ParamCandidate &c);
  /// Why a value the dynamo exporter folded through a many-to-one lookup of
  /// a parameter is kept constant ("" when it is trained).
  std::string foldedLookupReason(const std::string &name, ParamOrigins &origins,
                                 const std::vector<float> &values);
  /// The readers (node, input) of each `onnx::MatMul_N` initializer, built
  /// by the first stateDictNameOf that needs them.
  std::optional<std::map<std::string, std::vector<std::pair<int, int>>>>
      initializerReaders;
  /// Makes each candidate a constant (the import rules' reason), a tie of
  /// another, or an `otc.param` argument, and records which is which on
  /// the function.
  void addParamArguments(std::vector<ParamCandidate> &floats,
                         ParamOrigins &origins);
  /// Records (attrs::kUndecidedTies) each projection weight of the
  /// exporter's naming (a folded Wᵀ) that may be a tie's copy of an
  /// embedding table, of the transposed or same shape, when
  /// both hold few distinct values (a sizing file's zeros) and neither is
  /// tied: values decide ties where no exporter record does.
  void recordUndecidedTies(const std::vector<NamedTensor> &tieable,
                           const llvm::StringMap<InitializerTie> &copies);
  /// Records the parameters the exporter's optimizer removed (named by the
  /// traced calls, held by no initializer).
  void recordRemovedParams(ParamOrigins &origins);
  /// Builds the ops of one node.
  void importNode(const NodeInfo &node);
  /// Adds the return, the function type and the argument/result attributes.
  void finish();
  /// Erases otc.constant ops that nothing reads (left behind by folding).
  void eraseDeadConstants();
  /// Turns the float initializers whose values only reach comparisons (a
  /// mask buffer compared with 0) into constants: they cannot have a
  /// gradient, and later passes read their values (a causal mask becomes
  /// the attention's `causal` flag). Hands the others to `initializersOut`.
  void inlineConstantBuffers();
  /// inlineConstantBuffers' steps: the compared ones made constants (the
  /// others returned, in argument order); rotary tables (isRotationPair)
  /// and what the exporter's signature shows is no parameter marked
  /// buffers.
  std::vector<InitializerData> inlineComparedParams();
  void markRotaryTables(const std::vector<InitializerData> &kept);
  void markSignatureBuffers();
  /// Whether two parameters are a rotary table's cosines and sines.
  bool isRotationPair(const InitializerData &c, const InitializerData &s) const;
  /// The first `count` values of `d`, read from the model's external data
  /// where the import did not keep them.
  std::vector<float> firstValues(const InitializerData &d, int64_t count) const;

  //===--- Values (GraphWalk.cpp) -----------------------------------------===//

  /// The value named `name`, materializing a constant if needed.
  mlir::Value get(llvm::StringRef name);
  /// Input `idx` of the current node, or null when absent.
  mlir::Value getOptional(int idx);
  /// Input `idx` of the current node; an error when absent.
  mlir::Value input(int idx);
  /// True when input `idx` of the current node is present.
  bool hasInput(int idx) const;
  /// The contents of input `idx` when it is known at import time (a static,
  /// a value that folded to a constant, or a float initializer).
  std::optional<mlir::DenseElementsAttr> constantInput(int idx);
  /// The integer contents of input `idx`; fails with "shape computation did
  /// not fold" when it is not a constant, or when it is not an integer.
  llvm::SmallVector<int64_t> constantInts(int idx, const llvm::Twine &what);
  /// Like constantInts for one scalar (or 1-element) input, as a double.
  double constantScalar(int idx, const llvm::Twine &what);
  /// Binds output `outputIdx` of the current node to `v`.
  void define(int outputIdx, mlir::Value v);
  /// Binds output `outputIdx` to a constant known at import time.
  void defineConstant(int outputIdx, mlir::DenseElementsAttr attr);
  /// The otc.constant holding `s` (built once, at the top of the function).
  mlir::Value materialize(StaticValue &s);
  /// A 0-d f32 otc.constant at the current node.
  mlir::Value scalarF32(double v);
  /// A constant of the element type of `like` and shape [] holding `v`.
  mlir::Value scalarLike(mlir::Value like, double v);
  /// True when output `idx` of the current node is read by anything.
  bool outputUsed(int idx) const;

  //===--- Current node ---------------------------------------------------===//

  /// Fails with `node 'NAME' (OP): msg`.
  [[noreturn]] void nodeFail(const llvm::Twine &msg) const;
  /// Fails with `node 'NAME' (OP): shape computation did not fold: msg`.
  [[noreturn]] void foldFail(const llvm::Twine &msg) const;
  llvm::StringRef opType() const { return current->proto->op_type(); }
  /// The current node's attribute `name`, or null.
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t attrInt(llvm::StringRef name, int64_t dflt) const;
  float attrFloat(llvm::StringRef name, float dflt) const;
  std::string attrString(llvm::StringRef name, llvm::StringRef dflt) const;
  /// The ints of attribute `name`, or nullopt when absent.
  std::optional<llvm::SmallVector<int64_t>>
  attrInts(llvm::StringRef name) const;
  /// The axes a normalization over the current node's `axis` attribute
  /// (default -1) reduces: from it to the last of `shape`; `elements` gets
  /// how many elements each normalized row has.
  llvm::SmallVector<int64_t> normalizedAxes(llvm::ArrayRef<int64_t> shape,
                                            int64_t &elements);
  /// Normalizes an axis in [-rank, rank) to [0, rank); fails otherwise.
  int64_t normAxis(int64_t axis, int64_t rank, llvm::StringRef what) const;

  //===--- Types and shapes -----------------------------------------------===//

  llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) const;
  mlir::Type elemOf(mlir::Value v) const;
  /// Returns `v`, failing when it is not an f32 tensor.
  mlir::Value requireFloat(mlir::Value v, const llvm::Twine &what) const;
  /// Fails unless `v` is an integer tensor.
  mlir::Value requireInt(mlir::Value v, const llvm::Twine &what) const;
  mlir::RankedTensorType tensorType(llvm::ArrayRef<int64_t> shape,
                                    mlir::Type element) const;
  /// The numpy broadcast of two shapes; fails naming both.
  llvm::SmallVector<int64_t> broadcastOrFail(llvm::ArrayRef<int64_t> a,
                                             llvm::ArrayRef<int64_t> b) const;

  //===--- Building (createOrFold at the current node) --------------------===//

  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  mlir::Value broadcastTo(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  /// Elementwise binary op with broadcasting; both types must agree.
  template <typename OpTy> mlir::Value binary(mlir::Value a, mlir::Value b) {
    auto shape = broadcastOrFail(shapeOf(a), shapeOf(b));
    return builder.createOrFold<OpTy>(currentLoc, tensorType(shape, elemOf(a)),
                                      a, b);
  }
  /// Sum (or max) over `axes` (sorted, non-negative) with keep_dims.
  mlir::Value reduceSum(mlir::Value x, llvm::ArrayRef<int64_t> axes,
                        bool keepDims);
  mlir::Value reduceMax(mlir::Value x, llvm::ArrayRef<int64_t> axes,
                        bool keepDims);
  /// A Softmax-CE / NLL input [N, C, d...] and labels [N, d...] as
  /// [N*d..., C] and [N*d...]; returns the trailing dims d... in `extra`.
  void flattenLossInputs(mlir::Value &scores, mlir::Value &labels,
                         llvm::SmallVectorImpl<int64_t> &extra);
  /// What SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss share
  /// (NormalizationOps.cpp).
  template <typename LossOp>
  mlir::Value importLoss(mlir::Value scores, mlir::Value labels);

  mlir::MLIRContext &ctx;
  mlir::OpBuilder builder;
  std::string path;
  const ImportOptions &options;
  std::vector<InitializerData> *initializersOut;
  /// The values of the `otc.param` arguments, in argument order, until
  /// inlineConstantBuffers hands them out.
  std::vector<InitializerData> paramData;
  /// The trained initializers whose values an import that keeps none
  /// dropped (paramData holds their shapes only), to read again if needed.
  std::map<std::string, const onnx::TensorProto *> valuelessInits;
  InitializerCache *cache = nullptr;

  const onnx::ModelProto &model;
  int64_t opset = 0, fileOpset = 0;
  /// Whether run runs the ONNX checker on the file.
  bool check = true;
  std::vector<NodeInfo> nodes;
  /// Names read by some node input or graph output.
  llvm::StringSet<> used;
  /// Float initializers read only as import-time inputs (shapes, axes,
  /// Dropout ratio...) or as class weights of a loss: they stay constants
  /// instead of parameters.
  llvm::StringSet<> staticOnly;
  /// Graph inputs read as import-time inputs (shapes, axes...).
  llvm::StringSet<> staticGraphInputs;

  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  mlir::Block *entry = nullptr;
  llvm::SmallVector<std::pair<unsigned, mlir::NamedAttribute>> argAttrs;
  llvm::StringMap<mlir::Value> values;
  /// Sequences (SplitToSequence outputs) by name: their elements, read by
  /// SequenceAt. Only constant positions are supported, so a sequence is
  /// just its list of values.
  llvm::StringMap<llvm::SmallVector<mlir::Value>> sequences;
  llvm::StringMap<std::unique_ptr<StaticValue>> statics;
  std::optional<unsigned> rngKeyArg;
  /// Initializers split by splitMergedParams: (copy, original).
  std::vector<std::pair<std::string, std::string>> splitParams;
  /// Float initializers that the exporter's graph signature shows are no
  /// parameters (addParams): constant buffers, never trained.
  std::set<std::string> notParameters;
  int64_t dropoutStream = 0;
  const NodeInfo *current = nullptr;
  mlir::Location currentLoc = mlir::UnknownLoc::get(&ctx);
};

/// One supported ONNX op: the opsets it imports at, which inputs are read
/// only at import time (bit i = input i), and its builder.
struct OpInfo {
  const char *name;
  int64_t minOpset;
  unsigned staticInputs;
  void (Importer::*import)();
};

/// The supported op of this name (default domain), or null.
const OpInfo *lookupOp(llvm::StringRef name);

} // namespace detail
} // namespace otc

#endif // OTC_FRONTEND_IMPORTER_H
