//===- OnnxImporter.cpp - ONNX ModelProto to the otc dialect --------------===//
//
// Implements importOnnxModel: reads the model (ModelReader.cpp), walks its
// graph (GraphWalk.cpp) and builds `func.func @forward` in the otc dialect,
// one node at a time through the op table below, whose builders live in one
// file per op family. Result shapes are computed with the dialect's own shape
// rules (ir/ShapeUtils.h), never by ONNX shape inference, and ops are built
// with createOrFold so that shape computations become constants as soon as
// they are imported (symbolic dimensions are bound first).
//
// This file is compiled with exceptions because the ONNX and protobuf headers
// need them; importOnnxModel catches every exception and turns it into the
// one-line `error` string.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"
#include "ir/ShapeUtils.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <exception>
#include <set>

using namespace mlir;

namespace otc {
namespace detail {

//===----------------------------------------------------------------------===//
// The op table
//===----------------------------------------------------------------------===//

/// Bit mask of import-time inputs.
static constexpr unsigned in(int i) { return 1u << i; }

/// Every supported default-domain op, alphabetical. The opsets between
/// minOpset and kMaxOpset import; the builders handle the signature changes
/// within that range (attributes that became inputs and so on).
static const OpInfo kOps[] = {
    {"Abs", 13, 0, &Importer::importUnary},
    {"Add", 13, 0, &Importer::importBinary},
    {"And", 7, 0, &Importer::importLogic},
    {"ArgMax", 13, 0, &Importer::importArgMax},
    {"ArgMin", 13, 0, &Importer::importArgMax},
    {"Attention", 23, 0, &Importer::importAttention},
    {"AveragePool", 11, 0, &Importer::importAveragePool},
    {"Cast", 13, 0, &Importer::importCast},
    {"CastLike", 15, 0, &Importer::importCastLike},
    {"Ceil", 13, 0, &Importer::importFloorCeil},
    {"Clip", 13, 0, &Importer::importClip},
    {"Concat", 13, 0, &Importer::importConcat},
    {"Constant", 13, 0, &Importer::importConstant},
    {"ConstantOfShape", 13, in(0), &Importer::importConstantOfShape},
    {"Conv", 11, 0, &Importer::importConv},
    {"CumSum", 14, in(1), &Importer::importCumSum},
    {"Cos", 7, 0, &Importer::importUnary},
    {"Div", 13, 0, &Importer::importBinary},
    {"Dropout", 13, in(1) | in(2), &Importer::importDropout},
    {"Einsum", 12, 0, &Importer::importEinsum},
    {"Equal", 13, 0, &Importer::importCompare},
    {"Erf", 13, 0, &Importer::importUnary},
    {"Exp", 13, 0, &Importer::importUnary},
    {"Expand", 13, in(1), &Importer::importExpand},
    {"Flatten", 13, 0, &Importer::importFlatten},
    {"Floor", 13, 0, &Importer::importFloorCeil},
    {"Gather", 13, 0, &Importer::importGather},
    {"GatherElements", 13, 0, &Importer::importGatherElements},
    {"GatherND", 13, 0, &Importer::importGatherND},
    {"Gelu", 20, 0, &Importer::importGelu},
    {"Gemm", 13, 0, &Importer::importGemm},
    {"Greater", 13, 0, &Importer::importCompare},
    {"GreaterOrEqual", 13, 0, &Importer::importCompare},
    {"Identity", 13, 0, &Importer::importIdentity},
    {"IsInf", 10, 0, &Importer::importIsNan},
    {"IsNaN", 13, 0, &Importer::importIsNan},
    {"LayerNormalization", 17, 0, &Importer::importLayerNorm},
    {"Less", 13, 0, &Importer::importCompare},
    {"LessOrEqual", 13, 0, &Importer::importCompare},
    {"Log", 13, 0, &Importer::importUnary},
    {"LogSoftmax", 13, 0, &Importer::importSoftmax},
    {"MatMul", 13, 0, &Importer::importMatMul},
    {"Max", 13, 0, &Importer::importMinMax},
    {"Min", 13, 0, &Importer::importMinMax},
    {"Mod", 13, 0, &Importer::importMod},
    {"Mul", 13, 0, &Importer::importBinary},
    {"Neg", 13, 0, &Importer::importUnary},
    {"NegativeLogLikelihoodLoss", 13, 0, &Importer::importNllLoss},
    {"Not", 1, 0, &Importer::importLogic},
    {"OneHot", 11, in(1), &Importer::importOneHot},
    {"Or", 7, 0, &Importer::importLogic},
    {"Pad", 13, in(1) | in(2) | in(3), &Importer::importPad},
    {"Pow", 13, 0, &Importer::importPow},
    {"Range", 13, in(0) | in(1) | in(2), &Importer::importRange},
    {"Reciprocal", 13, 0, &Importer::importUnary},
    {"ReduceMax", 13, in(1), &Importer::importReduce},
    {"ReduceMean", 13, in(1), &Importer::importReduce},
    {"ReduceSum", 13, in(1), &Importer::importReduce},
    {"Relu", 13, 0, &Importer::importUnary},
    {"RMSNormalization", 23, 0, &Importer::importRmsNorm},
    {"Reshape", 13, in(1), &Importer::importReshape},
    {"Shape", 13, 0, &Importer::importShape},
    {"Sigmoid", 13, 0, &Importer::importUnary},
    {"RotaryEmbedding", 23, 0, &Importer::importRotaryEmbedding},
    {"ScatterElements", 13, 0, &Importer::importScatterElements},
    {"ScatterND", 13, in(1), &Importer::importScatterND},
    {"SequenceAt", 13, in(1), &Importer::importSequenceAt},
    {"Sign", 13, 0, &Importer::importUnary},
    {"Sin", 7, 0, &Importer::importUnary},
    {"Size", 13, 0, &Importer::importSize},
    {"Slice", 13, in(1) | in(2) | in(3) | in(4), &Importer::importSlice},
    {"Softmax", 13, 0, &Importer::importSoftmax},
    {"SoftmaxCrossEntropyLoss", 13, 0, &Importer::importSoftmaxCrossEntropy},
    {"Softplus", 1, 0, &Importer::importSoftplus},
    {"Split", 13, in(1), &Importer::importSplit},
    {"SplitToSequence", 13, in(1), &Importer::importSplitToSequence},
    {"Sqrt", 13, 0, &Importer::importUnary},
    {"Squeeze", 13, in(1), &Importer::importSqueeze},
    {"Sub", 13, 0, &Importer::importBinary},
    {"Tanh", 13, 0, &Importer::importUnary},
    {"Tile", 13, in(1), &Importer::importTile},
    {"TopK", 11, in(1), &Importer::importTopK},
    {"Transpose", 13, 0, &Importer::importTranspose},
    {"Trilu", 14, in(1), &Importer::importTrilu},
    {"Unsqueeze", 13, in(1), &Importer::importUnsqueeze},
    {"Where", 13, 0, &Importer::importWhere},
    {"Xor", 7, 0, &Importer::importLogic},
};

const OpInfo *lookupOp(StringRef name) {
  for (const OpInfo &op : kOps)
    if (name == op.name)
      return &op;
  return nullptr;
}

void Importer::importNode(const NodeInfo &node) {
  current = &node;
  currentLoc = NameLoc::get(builder.getStringAttr(node.name));
  const OpInfo *info = lookupOp(opType());
  assert(info && "prescan rejects unsupported ops");
  checkInputTypes();
  (this->*(info->import))();
  checkOutputs();
}

void Importer::eraseDeadConstants() {
  // Folding leaves the constants it read behind; walk backwards so that a
  // constant's users are gone before it is visited.
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(entry->getOperations())))
    if (op.use_empty() && isPure(&op) && !isa<func::ReturnOp>(op))
      op.erase();
}

/// Whether every path from `v` ends in an op with no float result (a
/// comparison, a cast to integers) after data movement only.
static bool onlyReachesComparisons(Value v) {
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value x = work.pop_back_val();
    for (Operation *user : x.getUsers()) {
      bool floatResult = llvm::any_of(user->getResultTypes(), [](Type t) {
        return isa<FloatType>(getElementTypeOrSelf(t));
      });
      if (!floatResult)
        continue;
      if (!isa<SliceOp, ReshapeOp, BroadcastOp, TransposeOp>(user))
        return false;
      llvm::append_range(work, user->getResults());
    }
  }
  return true;
}

/// Whether `c` and `s` are the cosines and sines of a rotation: of one
/// size (at least 4), c^2 + s^2 = 1 for each element, most of them at
/// angles that are not multiples of a right angle (which rules out a
/// LayerNorm's initial ones and zeros).
static bool isRotation(const std::vector<float> &c,
                       const std::vector<float> &s) {
  if (c.size() != s.size() || c.size() < 4)
    return false;
  size_t oblique = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    double r = double(c[i]) * c[i] + double(s[i]) * s[i];
    if (!(std::abs(r - 1.0) <= 1e-5))
      return false;
    oblique += std::min(std::abs(c[i]), std::abs(s[i])) > 1e-3;
  }
  return 2 * oblique >= c.size();
}

void Importer::inlineConstantBuffers() {
  std::vector<InitializerData> kept = inlineComparedParams();
  markRotaryTables(kept);
  markSignatureBuffers();
  if (initializersOut)
    *initializersOut = std::move(kept);
  paramData.clear();
}

std::vector<InitializerData> Importer::inlineComparedParams() {
  llvm::BitVector erase(entry->getNumArguments());
  std::vector<InitializerData> kept, inlined;
  size_t next = 0;
  for (BlockArgument arg : entry->getArguments()) {
    if (!func.getArgAttr(arg.getArgNumber(), attrs::kParam))
      continue;
    InitializerData &data = paramData[next++];
    if (arg.use_empty() || !onlyReachesComparisons(arg)) {
      kept.push_back(std::move(data));
      continue;
    }
    auto type = cast<RankedTensorType>(arg.getType());
    if (data.values.empty() && type.getNumElements() > 0)
      data.values = decodeTensor(*valuelessInits.at(data.name),
                                 "initializer '" + data.name + "'", path)
                        .floats;
    builder.setInsertionPointToStart(entry);
    Value c = builder.create<ConstantOp>(
        arg.getLoc(), DenseElementsAttr::get(type, ArrayRef<float>(data.values)));
    arg.replaceAllUsesWith(c);
    erase.set(arg.getArgNumber());
    inlined.push_back(std::move(data));
  }
  func.eraseArguments(erase);
  if (erase.any()) {
    NamedAttrList untrained;
    if (auto d = func->getAttrOfType<DictionaryAttr>(attrs::kUntrained))
      untrained.append(d.getValue());
    for (const InitializerData &d : inlined)
      untrained.set(d.name, builder.getStringAttr("only compared (a mask)"));
    func->setAttr(attrs::kUntrained, untrained.getDictionary(&ctx));
  }
  return kept;
}

std::vector<float> Importer::firstValues(const InitializerData &d,
                                         int64_t count) const {
  if (!d.values.empty())
    return std::vector<float>(d.values.begin(),
                              d.values.begin() +
                                  std::min<int64_t>(count, d.values.size()));
  auto it = valuelessInits.find(d.name);
  if (it == valuelessInits.end())
    return std::vector<float>();
  std::string what = "initializer '" + d.name + "'";
  return count >= numElements(d.shape)
             ? decodeTensor(*it->second, what, path).floats
             : readFloatRange(*it->second, what, path, 0, count);
}

bool Importer::isRotationPair(const InitializerData &c,
                              const InitializerData &s) const {
  if (c.shape != s.shape || c.shape.size() < 2)
    return false;
  if (!c.values.empty() && !s.values.empty())
    return isRotation(c.values, s.values);
  // Values the import did not keep are read from the model's external
  // data: the first ones, which tell a weight from a rotation at once, and
  // the rest only for a pair that passes them.
  constexpr int64_t kFirst = 4096;
  int64_t n = numElements(c.shape);
  return isRotation(firstValues(c, kFirst), firstValues(s, kFirst)) &&
         (n <= kFirst || isRotation(firstValues(c, n), firstValues(s, n)));
}

void Importer::markRotaryTables(const std::vector<InitializerData> &kept) {
  // Rotary tables: two float initializers of one shape (positions x
  // frequencies, at least) that are a rotation's cosines and sines: a
  // constant buffer of the model, never trained.
  SmallVector<unsigned> paramArgs;
  for (BlockArgument arg : entry->getArguments())
    if (func.getArgAttr(arg.getArgNumber(), attrs::kParam))
      paramArgs.push_back(arg.getArgNumber());
  for (size_t i = 0; i < kept.size() && i < paramArgs.size(); ++i)
    for (size_t j = i + 1; j < kept.size() && j < paramArgs.size(); ++j)
      if (isRotationPair(kept[i], kept[j])) {
        func.setArgAttr(paramArgs[i], attrs::kBuffer, builder.getUnitAttr());
        func.setArgAttr(paramArgs[j], attrs::kBuffer, builder.getUnitAttr());
      }
}

void Importer::markSignatureBuffers() {
  // What the exporter's graph signature shows is no parameter (a rotary
  // table or its angles, computed from the inv_freq buffer): a buffer too,
  // listed with why.
  NamedAttrList untrained;
  if (auto d = func->getAttrOfType<DictionaryAttr>(attrs::kUntrained))
    untrained.append(d.getValue());
  bool listed = false;
  for (BlockArgument arg : entry->getArguments()) {
    unsigned i = arg.getArgNumber();
    auto name = func.getArgAttrOfType<StringAttr>(i, attrs::kParam);
    if (!name || !notParameters.count(name.str()))
      continue;
    func.setArgAttr(i, attrs::kBuffer, builder.getUnitAttr());
    untrained.set(name, builder.getStringAttr(
                            "a buffer, not a parameter: the exporter computed "
                            "it from buffers and constants (its graph "
                            "signature and folded_from)"));
    listed = true;
  }
  if (listed)
    func->setAttr(attrs::kUntrained, untrained.getDictionary(&ctx));
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> Importer::run() {
  prescan();
  // The checker reads the file as written, at its own opset.
  if (check)
    runChecker(path, fileOpset);
  for (const NodeInfo &node : nodes)
    checkNodeSchema(node);

  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module->getBody());
  std::string graphName = model.graph().name();
  func = builder.create<func::FuncOp>(
      NameLoc::get(
          builder.getStringAttr(graphName.empty() ? "forward" : graphName)),
      "forward", builder.getFunctionType({}, {}));
  entry = new Block();
  func.getBody().push_back(entry);

  addInputs();
  addParams();
  builder.setInsertionPointToEnd(entry);
  for (const NodeInfo &node : nodes) {
    importNode(node);
    builder.setInsertionPointToEnd(entry);
  }
  finish();
  inlineConstantBuffers();
  eraseDeadConstants();

  // Anything the verifier rejects is an importer bug; report it as one line.
  std::string diag;
  {
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      if (diag.empty() && d.getSeverity() == DiagnosticSeverity::Error) {
        llvm::raw_string_ostream os(diag);
        os << d.getLocation() << ": " << d.str();
      }
      return success();
    });
    if (failed(verify(*module)))
      fail("internal error: the imported IR of '" + path +
           "' does not verify: " + oneLine(diag));
  }
  return std::move(module);
}

/// `msg` with its control characters escaped (`\n`, `\x01`): names read
/// from the model may hold any byte, the error stays one line.
static std::string escapeControls(StringRef msg) {
  std::string out;
  for (char c : msg) {
    auto u = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (u < 0x20 || u == 0x7f)
      out += llvm::formatv("\\x{0:x-2}", static_cast<unsigned>(u)).str();
    else
      out += c;
  }
  return out;
}

} // namespace detail

LoadedOnnxModel::~LoadedOnnxModel() = default;

/// Runs `body`, turning what it throws into `error` (one line).
template <typename F>
static auto catchingImportErrors(StringRef path, std::string &error, F body)
    -> decltype(body()) {
  try {
    return body();
  } catch (const detail::ImportError &e) {
    error = detail::escapeControls(e.what());
  } catch (const std::exception &e) {
    error = detail::escapeControls("while importing '" + path.str() +
                                   "': " + detail::oneLine(e.what()));
  } catch (...) {
    error = "while importing '" + path.str() + "': unknown exception";
  }
  return nullptr;
}

std::unique_ptr<LoadedOnnxModel> loadOnnxModel(StringRef path,
                                               std::string &error) {
  return catchingImportErrors(path, error, [&] {
    std::unique_ptr<LoadedOnnxModel> loaded(new LoadedOnnxModel());
    loaded->initializerCache = std::make_shared<detail::InitializerCache>();
    loaded->file = path.str();
    loaded->model = std::make_unique<onnx::ModelProto>();
    detail::loadModel(loaded->file, *loaded->model);
    loaded->fileOpset = detail::checkHeader(loaded->file, *loaded->model);
    detail::rewriteMaskedScatter(*loaded->model->mutable_graph());
    if (loaded->fileOpset >= detail::kMinOpset)
      loaded->splitParams =
          detail::splitMergedParams(*loaded->model, loaded->file);
    return loaded;
  });
}

/// The batch the export fixed: the leading dimension that every graph input
/// of rank one or more declares as the same number, when `--micro-batch`
/// asks for another; none where an input's leading dimension is symbolic or
/// the inputs disagree (then nothing is re-bound).
static std::optional<std::pair<int64_t, std::string>>
exportedBatch(const onnx::GraphProto &graph, const ImportOptions &options) {
  if (!options.microBatch)
    return std::nullopt;
  std::set<std::string> inits;
  for (const auto &init : graph.initializer())
    inits.insert(init.name());
  std::optional<int64_t> fixed;
  std::string first;
  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (inits.count(in.name()) || !in.type().has_tensor_type() ||
        !in.type().tensor_type().has_shape() ||
        in.type().tensor_type().shape().dim_size() == 0)
      continue;
    const auto &d0 = in.type().tensor_type().shape().dim(0);
    if (!d0.has_dim_value() || (fixed && *fixed != d0.dim_value()))
      return std::nullopt;
    if (!fixed)
      first = in.name();
    fixed = d0.dim_value();
  }
  if (!fixed || *fixed == *options.microBatch || *fixed <= 0)
    return std::nullopt;
  return std::make_pair(*fixed, first);
}

OwningOpRef<ModuleOp>
importOnnxModel(MLIRContext &context, const LoadedOnnxModel &loaded,
                const ImportOptions &givenOptions, std::string &error,
                std::vector<InitializerData> *initializers) {
  context.loadDialect<OtcDialect, func::FuncDialect>();
  // A batch the export fixed is re-bound to --micro-batch where every shape
  // follows it; else one line says so (never a plan of rows the program
  // does not hold).
  ImportOptions options = givenOptions;
  std::optional<std::pair<int64_t, std::string>> fixed =
      exportedBatch(loaded.model->graph(), givenOptions);
  if (fixed)
    options.fixedBatch = fixed->first;
  if (initializers)
    initializers->clear();
  OwningOpRef<ModuleOp> module =
      catchingImportErrors(loaded.file, error, [&]() -> OwningOpRef<ModuleOp> {
        // An older model is upgraded here, on a copy: the upgrade binds the
        // symbolic dimensions of this import.
        std::optional<onnx::ModelProto> upgraded;
        const onnx::ModelProto *model = loaded.model.get();
        int64_t opset = loaded.fileOpset;
        std::vector<std::pair<std::string, std::string>> splits =
            loaded.splitParams;
        if (opset < detail::kMinOpset) {
          upgraded = *loaded.model;
          opset = detail::upgradeOpset(loaded.file, *upgraded,
                                       loaded.fileOpset, options);
          splits = detail::splitMergedParams(*upgraded, loaded.file);
          model = &*upgraded;
        }
        detail::Importer importer(context, loaded.file, *model, opset,
                                  loaded.fileOpset, !loaded.checked,
                                  std::move(splits), options, initializers);
        // The cache holds for the file as loaded: an upgraded copy (an
        // older opset) is rebuilt per import, so it keeps none.
        if (!upgraded)
          importer.setInitializerCache(
              static_cast<detail::InitializerCache *>(
                  loaded.initializerCache.get()));
        OwningOpRef<ModuleOp> m = importer.run();
        loaded.checked = true;
        return m;
      });
  if (!module && initializers)
    initializers->clear();
  if (fixed && !module)
    error = llvm::formatv(
                "input '{0}' has its batch fixed at {1} by the export, and "
                "--micro-batch {2} cannot re-bind it ({3}): export with a "
                "dynamic batch (torch.onnx.export(..., dynamic_shapes={{'{0}': "
                "{{0: torch.export.Dim('batch')}}) with dynamo=True, "
                "dynamic_axes={{'{0}': {{0: 'batch'}} with dynamo=False), or "
                "compile with --micro-batch {1} (--grad-accum adds samples per "
                "step, but a loss computed across the batch sees one "
                "micro-batch at a time: CLIPModel's contrastive loss, only "
                "that micro-batch's negatives); where one was asked for, "
                "torch.export fixed it because the model's code computes with "
                "the batch size (CLIPModel's return_loss)",
                fixed->second, fixed->first, *options.microBatch, error)
                .str();
  if (fixed && module)
    (*module)->setAttr(attrs::kReboundBatch,
                       IntegerAttr::get(IntegerType::get(&context, 64),
                                        fixed->first));
  return module;
}

OwningOpRef<ModuleOp>
importOnnxModel(MLIRContext &context, StringRef path,
                const ImportOptions &options, std::string &error,
                std::vector<InitializerData> *initializers) {
  std::unique_ptr<LoadedOnnxModel> loaded = loadOnnxModel(path, error);
  if (!loaded)
    return nullptr;
  return importOnnxModel(context, *loaded, options, error, initializers);
}

} // namespace otc
