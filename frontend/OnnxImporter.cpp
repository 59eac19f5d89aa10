//===- OnnxImporter.cpp - ONNX ModelProto to the otc dialect --------------===//
//
// Implements importOnnxModel: parses an ONNX ModelProto (with its external
// data), checks it, binds its symbolic dimensions and builds `func.func
// @forward` in the otc dialect. Result shapes are computed here with the
// dialect's own shape rules (ir/ShapeUtils.h), not by ONNX shape inference,
// so what the importer builds is exactly what the verifiers accept.
//
// This file is compiled with exceptions because the ONNX and protobuf headers
// need them. The importer itself reports errors by throwing ImportError from
// its own code (never through MLIR callbacks); importOnnxModel catches it and
// every other exception and turns them into the one-line `error` string.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "onnx/checker.h"
#include "onnx/onnx_pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>

using namespace mlir;

namespace otc {
namespace {

/// The default-domain opsets the importer knows the op semantics of.
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 21;
/// The newest default-domain opset libonnx 1.12's checker knows.
constexpr int64_t kMaxCheckerOpset = 17;

/// An import failure; its message is the final one-line error.
class ImportError : public std::runtime_error {
public:
  explicit ImportError(const std::string &msg) : std::runtime_error(msg) {}
};

/// Throws an ImportError carrying `msg`.
[[noreturn]] void fail(const Twine &msg) { throw ImportError(msg.str()); }

/// Formats a shape as `[4, 3]`.
std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

/// Makes a possibly multi-line message fit on one line.
std::string oneLine(StringRef msg) {
  std::string out;
  bool space = false;
  for (char c : msg.trim()) {
    if (c == '\n' || c == '\r' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty())
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

/// Name of an ONNX tensor element type, e.g. "FLOAT16".
std::string dataTypeName(int32_t type) {
  if (onnx::TensorProto_DataType_IsValid(type))
    return onnx::TensorProto_DataType_Name(type);
  return "type " + std::to_string(type);
}

/// Converts IEEE half-precision bits to float.
float halfToFloat(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return (h & 0x8000) ? -v : v;
}

/// Converts bfloat16 bits to float.
float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

/// Widens a float read from the model to the double with the same shortest
/// decimal form (0.1f becomes 0.1, not 0.10000000149011612).
double widenFloat(float v) {
  if (!std::isfinite(v))
    return v;
  for (int digits = 1; digits <= 9; ++digits) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.*g", digits, static_cast<double>(v));
    double d = std::strtod(text, nullptr);
    if (static_cast<float>(d) == v)
      return d;
  }
  return v;
}

/// The element kinds the importer represents.
enum class Kind { F32, I64, I32, I1 };

/// Maps an ONNX element type to the kind it is imported as, if supported.
/// All floating-point types become f32.
std::optional<Kind> kindOf(int32_t type) {
  switch (type) {
  case onnx::TensorProto_DataType_FLOAT:
  case onnx::TensorProto_DataType_DOUBLE:
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
    return Kind::F32;
  case onnx::TensorProto_DataType_INT64:
    return Kind::I64;
  case onnx::TensorProto_DataType_INT32:
    return Kind::I32;
  case onnx::TensorProto_DataType_BOOL:
    return Kind::I1;
  default:
    return std::nullopt;
  }
}

/// Bytes per element of an ONNX type in raw_data (0 when unsupported).
size_t rawElementSize(int32_t type) {
  switch (type) {
  case onnx::TensorProto_DataType_FLOAT:
  case onnx::TensorProto_DataType_INT32:
    return 4;
  case onnx::TensorProto_DataType_DOUBLE:
  case onnx::TensorProto_DataType_INT64:
    return 8;
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
    return 2;
  case onnx::TensorProto_DataType_BOOL:
    return 1;
  default:
    return 0;
  }
}

/// The MLIR element type of a kind.
Type elementType(MLIRContext *ctx, Kind kind) {
  switch (kind) {
  case Kind::F32:
    return Float32Type::get(ctx);
  case Kind::I64:
    return IntegerType::get(ctx, 64);
  case Kind::I32:
    return IntegerType::get(ctx, 32);
  case Kind::I1:
    return IntegerType::get(ctx, 1);
  }
  llvm_unreachable("unknown kind");
}

/// A tensor whose contents are known at import time (an initializer or a
/// Constant node output). Float kinds use `floats`, the others `ints`.
struct StaticTensor {
  Kind kind = Kind::F32;
  SmallVector<int64_t> shape;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  /// Where a materialized otc.constant of it is located.
  Location loc;
  /// The otc.constant built for it, once some op uses it as a tensor.
  Value materialized;

  explicit StaticTensor(Location loc) : loc(loc) {}
  int64_t size() const {
    return kind == Kind::F32 ? static_cast<int64_t>(floats.size())
                             : static_cast<int64_t>(ints.size());
  }
};

/// Per-node facts computed before building: its display name.
struct NodeInfo {
  const onnx::NodeProto *proto;
  std::string name;
};

/// Builds the otc module for one model.
class Importer {
public:
  Importer(MLIRContext &ctx, StringRef path, const ImportOptions &options,
           std::vector<InitializerData> *initializers)
      : ctx(ctx), builder(&ctx), path(path.str()), options(options),
        initializersOut(initializers) {}

  OwningOpRef<ModuleOp> run();

private:
  /// Reads and parses the file into `model`.
  void load();
  /// Checks ir_version, the default-domain opset and the graph.
  void checkHeader();
  /// Runs the ONNX checker when libonnx knows the opset.
  void runChecker();
  /// Names the nodes, rejects unsupported ops and undefined or out-of-order
  /// values, and finds the initializers read only at import time.
  void prescan();

  /// Adds the graph inputs as `otc.input` arguments, binding symbolic dims.
  void addInputs();
  /// Adds the float initializers as `otc.param` arguments; keeps the others.
  void addParams();
  /// Builds the ops of one node.
  void importNode(const NodeInfo &node);
  /// Adds the return, the function type and the argument/result attributes.
  void finish();

  /// Decodes an initializer or Constant value; `what` names it in errors.
  StaticTensor decodeTensor(const onnx::TensorProto &t, const Twine &what,
                            Location loc);
  std::unique_ptr<llvm::MemoryBuffer> readExternal(const onnx::TensorProto &t,
                                                   const Twine &what,
                                                   size_t expectedBytes);

  /// The value named `name`, materializing a constant if needed.
  Value get(StringRef name);
  /// Input `idx` of the current node, or null when absent.
  Value getOptional(int idx);
  /// Input `idx` of the current node; an error when absent.
  Value input(int idx);
  /// The import-time contents of input `idx`; an error when not constant.
  const StaticTensor &staticInput(int idx, const Twine &what);
  /// Binds output `outputIdx` of the current node to `v`.
  void define(int outputIdx, Value v);
  /// The otc.constant holding `t` (built once, at the top of the function).
  Value materialize(StaticTensor &t);
  /// A 0-d f32 otc.constant at the current node.
  Value scalarF32(float v);
  /// True when output `idx` of the current node is read by anything.
  bool outputUsed(int idx) const;

  /// Fails with `node 'NAME' (OP): msg`.
  [[noreturn]] void nodeFail(const Twine &msg) const;
  /// The current node's attribute `name`, or null.
  const onnx::AttributeProto *attr(StringRef name) const;
  int64_t attrInt(StringRef name, int64_t dflt) const;
  float attrFloat(StringRef name, float dflt) const;
  std::string attrString(StringRef name, StringRef dflt) const;
  ArrayRef<int64_t> shapeOf(Value v) const;
  Kind kindOfValue(Value v) const;
  /// Returns `v`, failing when it is not an f32 tensor.
  Value requireFloat(Value v, const Twine &what) const;
  RankedTensorType tensorType(ArrayRef<int64_t> shape, Type element) const;

  // One builder per supported op family, on the current node.
  void importMatMul();
  void importGemm();
  void importBinary();
  void importUnary();
  void importTranspose();
  void importReshape();
  void importDropout();
  void importSoftmaxCrossEntropy();
  void importConstant();

  MLIRContext &ctx;
  OpBuilder builder;
  std::string path;
  const ImportOptions &options;
  std::vector<InitializerData> *initializersOut;

  onnx::ModelProto model;
  int64_t opset = 0;
  std::vector<NodeInfo> nodes;
  /// Names read by some node input or graph output.
  llvm::StringSet<> used;
  /// Float initializers read only as static inputs (Reshape shape, Dropout
  /// ratio/training_mode): they stay constants instead of parameters.
  llvm::StringSet<> staticOnly;

  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  Block *entry = nullptr;
  SmallVector<std::pair<unsigned, NamedAttribute>> argAttrs;
  llvm::StringMap<Value> values;
  llvm::StringMap<std::unique_ptr<StaticTensor>> statics;
  std::optional<unsigned> rngKeyArg;
  int64_t dropoutStream = 0;
  const NodeInfo *current = nullptr;
  Location currentLoc = UnknownLoc::get(&ctx);
};

//===----------------------------------------------------------------------===//
// Loading and checking
//===----------------------------------------------------------------------===//

/// Returns the byte offset of the first top-level protobuf field of `data`
/// that cannot be read, if any.
std::optional<int64_t> firstBadFieldOffset(const std::string &data) {
  namespace pb = google::protobuf;
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(data.data()),
                              static_cast<int>(data.size()));
  in.SetTotalBytesLimit(INT_MAX);
  while (true) {
    int64_t pos = in.CurrentPosition();
    uint32_t tag = in.ReadTag();
    if (tag == 0)
      return pos == static_cast<int64_t>(data.size())
                 ? std::nullopt
                 : std::optional<int64_t>(pos);
    if (!pb::internal::WireFormatLite::SkipField(&in, tag))
      return pos;
  }
}

void Importer::load() {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    fail("cannot read '" + path + "': " + buffer.getError().message());
  StringRef bytes = (*buffer)->getBuffer();
  if (bytes.empty())
    fail("'" + path + "' is empty (0 bytes), not an ONNX model");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    fail("'" + path + "' is larger than 2 GiB (" + Twine(bytes.size()) +
         " bytes): store the weights as ONNX external data");
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    std::string msg = "failed to parse '" + path + "' as an ONNX ModelProto (" +
                      std::to_string(bytes.size()) + " bytes)";
    if (auto off = firstBadFieldOffset(bytes.str()))
      msg += ": field at byte offset " + std::to_string(*off) +
             " is truncated or malformed";
    fail(msg);
  }
}

void Importer::checkHeader() {
  if (model.ir_version() <= 0)
    fail("'" + path + "' has no ir_version: not an ONNX model?");
  bool found = false;
  for (const auto &imp : model.opset_import()) {
    if (imp.domain().empty() || imp.domain() == "ai.onnx") {
      opset = imp.version();
      found = true;
    }
  }
  if (!found)
    fail("'" + path + "' has no opset_import for the default ONNX domain");
  if (!model.has_graph())
    fail("'" + path + "' has no graph");
  if (opset < kMinOpset || opset > kMaxOpset)
    fail("'" + path + "' uses ONNX opset " + Twine(opset) +
         "; the importer supports opsets " + Twine(kMinOpset) + " to " +
         Twine(kMaxOpset));
}

void Importer::runChecker() {
  // libonnx 1.12 rejects opsets it does not know; skip the checker there.
  if (opset > kMaxCheckerOpset)
    return;
  // The path overload resolves external data relative to the model's
  // directory (the ModelProto one would use the working directory).
  try {
    onnx::checker::check_model(path);
  } catch (const std::exception &e) {
    fail("'" + path + "' fails the ONNX checker: " + oneLine(e.what()));
  }
}

/// The op types the importer builds (default domain).
bool isSupportedOp(StringRef op) {
  static const llvm::StringSet<> kOps = {
      "MatMul",  "Gemm",     "Add",     "Sub",
      "Mul",     "Div",      "Neg",     "Exp",
      "Log",     "Tanh",     "Relu",    "Transpose",
      "Reshape", "Identity", "Dropout", "SoftmaxCrossEntropyLoss",
      "Constant"};
  return kOps.contains(op);
}

/// True when input `idx` of an `op` node is read only at import time.
bool isStaticInput(StringRef op, int idx) {
  return (op == "Reshape" && idx == 1) || (op == "Dropout" && idx >= 1);
}

void Importer::prescan() {
  const onnx::GraphProto &graph = model.graph();
  if (graph.sparse_initializer_size() > 0)
    fail("'" + path + "': sparse initializers are not supported (first: '" +
         graph.sparse_initializer(0).values().name() + "')");

  // Names and unsupported ops.
  std::string unsupported;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &n = graph.node(i);
    std::string name =
        n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
    nodes.push_back({&n, name});
    bool defaultDomain = n.domain().empty() || n.domain() == "ai.onnx";
    if (defaultDomain && isSupportedOp(n.op_type()))
      continue;
    int64_t version = defaultDomain ? opset : 0;
    for (const auto &imp : model.opset_import())
      if (!defaultDomain && imp.domain() == n.domain())
        version = imp.version();
    if (!unsupported.empty())
      unsupported += ", ";
    unsupported += (defaultDomain ? "" : n.domain() + ".") + n.op_type() +
                   " (node '" + name + "', opset " + std::to_string(version) +
                   ")";
  }
  if (!unsupported.empty())
    fail("unsupported ops: " + unsupported);

  // Definitions in order, and which node defines what.
  llvm::StringMap<size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const std::string &out : nodes[i].proto->output())
      if (!out.empty())
        producer.try_emplace(out, i);
  llvm::StringSet<> defined;
  for (const auto &in : graph.input())
    defined.insert(in.name());
  for (const auto &init : graph.initializer())
    defined.insert(init.name());

  llvm::StringSet<> dynamicUse, staticUse;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo &node = nodes[i];
    for (int j = 0; j < node.proto->input_size(); ++j) {
      const std::string &in = node.proto->input(j);
      if (in.empty())
        continue;
      used.insert(in);
      (isStaticInput(node.proto->op_type(), j) ? staticUse : dynamicUse)
          .insert(in);
      if (defined.contains(in))
        continue;
      std::string where = "node '" + node.name + "' (" + node.proto->op_type() +
                          "): input '" + in + "'";
      auto it = producer.find(in);
      if (it == producer.end())
        fail(where + " is never defined");
      const NodeInfo &later = nodes[it->second];
      fail(where + " is produced by node '" + later.name + "' (" +
           later.proto->op_type() +
           ") which comes later: nodes must be in topological order");
    }
    for (const std::string &out : node.proto->output())
      if (!out.empty())
        defined.insert(out);
  }
  for (const auto &out : graph.output()) {
    used.insert(out.name());
    dynamicUse.insert(out.name());
    if (!defined.contains(out.name()))
      fail("graph output '" + out.name() + "' is never defined");
  }
  for (const auto &init : graph.initializer())
    if (staticUse.contains(init.name()) && !dynamicUse.contains(init.name()))
      staticOnly.insert(init.name());
}

//===----------------------------------------------------------------------===//
// Tensor data
//===----------------------------------------------------------------------===//

/// Reads the bytes of an EXTERNAL tensor from the file its `location` names
/// (relative to the model's directory), checking offset and length.
std::unique_ptr<llvm::MemoryBuffer>
Importer::readExternal(const onnx::TensorProto &t, const Twine &what,
                       size_t expectedBytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      int64_t v;
      if (StringRef(kv.value()).getAsInteger(10, v) || v < 0)
        fail(what + ": external data " + kv.key() + " '" + kv.value() +
             "' is not a non-negative integer");
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty())
    fail(what + ": external data has no 'location'");
  SmallString<256> file(location);
  if (!llvm::sys::path::is_absolute(file)) {
    file = llvm::sys::path::parent_path(path);
    llvm::sys::path::append(file, location);
  }
  if (length < 0)
    length = static_cast<int64_t>(expectedBytes);
  if (static_cast<size_t>(length) != expectedBytes)
    fail(what + ": external data in '" + file + "' has length " +
         Twine(length) + " but the shape needs " + Twine(expectedBytes) +
         " bytes");
  auto buffer = llvm::MemoryBuffer::getFileSlice(file, length, offset);
  if (!buffer)
    fail(what + ": cannot read external data '" + file +
         "': " + buffer.getError().message());
  // getFileSlice pads short reads with zeros; check the file size.
  uint64_t fileSize = 0;
  if (llvm::sys::fs::file_size(file, fileSize) ||
      fileSize < static_cast<uint64_t>(offset + length))
    fail(what + ": external data '" + file + "' has " + Twine(fileSize) +
         " bytes, fewer than offset " + Twine(offset) + " + length " +
         Twine(length));
  return std::move(*buffer);
}

StaticTensor Importer::decodeTensor(const onnx::TensorProto &t,
                                    const Twine &what, Location loc) {
  int32_t type = t.data_type();
  std::optional<Kind> kind = kindOf(type);
  if (!kind)
    fail(what + " has element type " + dataTypeName(type) +
         ", which is not supported");
  StaticTensor out(loc);
  out.kind = *kind;
  for (int64_t d : t.dims()) {
    if (d < 0)
      fail(what + " has a negative dimension " + Twine(d));
    out.shape.push_back(d);
  }
  const int64_t n = numElements(out.shape);
  const size_t elemSize = rawElementSize(type);

  // The raw bytes, from raw_data or an external file.
  std::unique_ptr<llvm::MemoryBuffer> external;
  std::optional<StringRef> raw;
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    external = readExternal(t, what, n * elemSize);
    raw = external->getBuffer();
  } else if (t.has_raw_data()) {
    raw = StringRef(t.raw_data());
    if (raw->size() != n * elemSize)
      fail(what + " has " + Twine(raw->size()) + " bytes of raw_data but " +
           shapeStr(out.shape) + " " + dataTypeName(type) + " needs " +
           Twine(n * elemSize));
  }

  auto count = [&](int64_t have) {
    if (have != n)
      fail(what + " has " + Twine(have) + " values but its shape " +
           shapeStr(out.shape) + " needs " + Twine(n));
  };
  if (raw) {
    const char *p = raw->data();
    auto load = [&](auto dummy, int64_t i) {
      decltype(dummy) v;
      std::memcpy(&v, p + i * sizeof(v), sizeof(v));
      return v;
    };
    for (int64_t i = 0; i < n; ++i) {
      switch (type) {
      case onnx::TensorProto_DataType_FLOAT:
        out.floats.push_back(load(float(), i));
        break;
      case onnx::TensorProto_DataType_DOUBLE:
        out.floats.push_back(static_cast<float>(load(double(), i)));
        break;
      case onnx::TensorProto_DataType_FLOAT16:
        out.floats.push_back(halfToFloat(load(uint16_t(), i)));
        break;
      case onnx::TensorProto_DataType_BFLOAT16:
        out.floats.push_back(bf16ToFloat(load(uint16_t(), i)));
        break;
      case onnx::TensorProto_DataType_INT64:
        out.ints.push_back(load(int64_t(), i));
        break;
      case onnx::TensorProto_DataType_INT32:
        out.ints.push_back(load(int32_t(), i));
        break;
      case onnx::TensorProto_DataType_BOOL:
        out.ints.push_back(load(uint8_t(), i) != 0);
        break;
      }
    }
    return out;
  }

  // Typed fields.
  switch (type) {
  case onnx::TensorProto_DataType_FLOAT:
    count(t.float_data_size());
    out.floats.assign(t.float_data().begin(), t.float_data().end());
    break;
  case onnx::TensorProto_DataType_DOUBLE:
    count(t.double_data_size());
    for (double v : t.double_data())
      out.floats.push_back(static_cast<float>(v));
    break;
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
    count(t.int32_data_size());
    for (int32_t v : t.int32_data())
      out.floats.push_back(type == onnx::TensorProto_DataType_FLOAT16
                               ? halfToFloat(static_cast<uint16_t>(v))
                               : bf16ToFloat(static_cast<uint16_t>(v)));
    break;
  case onnx::TensorProto_DataType_INT64:
    count(t.int64_data_size());
    out.ints.assign(t.int64_data().begin(), t.int64_data().end());
    break;
  case onnx::TensorProto_DataType_INT32:
  case onnx::TensorProto_DataType_BOOL:
    count(t.int32_data_size());
    for (int32_t v : t.int32_data())
      out.ints.push_back(type == onnx::TensorProto_DataType_BOOL ? v != 0 : v);
    break;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Function arguments and results
//===----------------------------------------------------------------------===//

void Importer::addInputs() {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringSet<> inits;
  for (const auto &init : graph.initializer())
    inits.insert(init.name());

  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (inits.contains(in.name()))
      continue;
    std::string what = "input '" + in.name() + "'";
    if (!in.type().has_tensor_type())
      fail(what + " is not a tensor");
    const auto &tt = in.type().tensor_type();
    std::optional<Kind> kind = kindOf(tt.elem_type());
    if (!kind)
      fail(what + " has element type " + dataTypeName(tt.elem_type()) +
           ", which is not supported");
    if (!tt.has_shape())
      fail(what + " has no shape (rank unknown)");
    SmallVector<int64_t> shape;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto &dim = tt.shape().dim(i);
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0)
          fail(what + " dimension " + Twine(i) + " is negative");
        shape.push_back(dim.dim_value());
        continue;
      }
      const std::string &param = dim.dim_param();
      auto bound =
          param.empty() ? options.dims.end() : options.dims.find(param);
      if (bound != options.dims.end()) {
        shape.push_back(bound->second);
      } else if (i == 0 && options.microBatch) {
        shape.push_back(*options.microBatch);
      } else if (param.empty()) {
        fail(what + " dimension " + Twine(i) +
             " is unknown: bind it with --micro-batch N (leading dimension "
             "only) or give it a dim_param");
      } else {
        fail(what + " dimension " + Twine(i) + " ('" + param +
             "') is symbolic: bind it with --dim " + param + "=N" +
             (i == 0 ? " or --micro-batch N" : ""));
      }
      if (shape.back() <= 0)
        fail(what + " dimension " + Twine(i) + " is bound to " +
             Twine(shape.back()) + ", not a positive size");
    }
    Location loc = NameLoc::get(builder.getStringAttr(in.name()));
    Value arg = entry->addArgument(
        RankedTensorType::get(shape, elementType(&ctx, *kind)), loc);
    argAttrs.push_back({cast<BlockArgument>(arg).getArgNumber(),
                        builder.getNamedAttr(
                            attrs::kInput, builder.getStringAttr(in.name()))});
    values[in.name()] = arg;
  }
}

void Importer::addParams() {
  for (const onnx::TensorProto &init : model.graph().initializer()) {
    Location loc = NameLoc::get(builder.getStringAttr(init.name()));
    auto tensor = std::make_unique<StaticTensor>(
        decodeTensor(init, "initializer '" + init.name() + "'", loc));
    if (tensor->kind == Kind::F32 && !staticOnly.contains(init.name())) {
      Value arg = entry->addArgument(
          RankedTensorType::get(tensor->shape, builder.getF32Type()), loc);
      argAttrs.push_back(
          {cast<BlockArgument>(arg).getArgNumber(),
           builder.getNamedAttr(attrs::kParam,
                                builder.getStringAttr(init.name()))});
      values[init.name()] = arg;
      if (initializersOut)
        initializersOut->push_back(
            {init.name(),
             std::vector<int64_t>(tensor->shape.begin(), tensor->shape.end()),
             std::move(tensor->floats)});
      continue;
    }
    statics[init.name()] = std::move(tensor);
  }
}

void Importer::finish() {
  current = nullptr;
  SmallVector<Value> results;
  for (const auto &out : model.graph().output())
    results.push_back(get(out.name()));
  builder.setInsertionPointToEnd(entry);
  builder.create<func::ReturnOp>(
      NameLoc::get(builder.getStringAttr(model.graph().name())), results);

  func.setType(FunctionType::get(&ctx, entry->getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  for (auto &[idx, attr] : argAttrs)
    func.setArgAttr(idx, attr.getName(), attr.getValue());
  if (rngKeyArg)
    func.setArgAttr(*rngKeyArg, attrs::kRngKey, builder.getUnitAttr());
  for (auto [i, out] : llvm::enumerate(model.graph().output()))
    func.setResultAttr(i, attrs::kOutput, builder.getStringAttr(out.name()));
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

Value Importer::materialize(StaticTensor &t) {
  if (t.materialized)
    return t.materialized;
  auto type = RankedTensorType::get(t.shape, elementType(&ctx, t.kind));
  DenseElementsAttr attr;
  switch (t.kind) {
  case Kind::F32:
    attr = DenseElementsAttr::get(type, ArrayRef<float>(t.floats));
    break;
  case Kind::I64:
    attr = DenseElementsAttr::get(type, ArrayRef<int64_t>(t.ints));
    break;
  case Kind::I32: {
    SmallVector<int32_t> v(t.ints.begin(), t.ints.end());
    attr = DenseElementsAttr::get(type, ArrayRef<int32_t>(v));
    break;
  }
  case Kind::I1: {
    SmallVector<bool> v;
    for (int64_t x : t.ints)
      v.push_back(x != 0);
    attr = DenseElementsAttr::get(type, ArrayRef<bool>(v));
    break;
  }
  }
  // Constants go to the top of the function so that every later use sees them.
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(entry);
  t.materialized = builder.create<ConstantOp>(t.loc, attr).getResult();
  return t.materialized;
}

Value Importer::get(StringRef name) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto st = statics.find(name);
  if (st != statics.end())
    return materialize(*st->second);
  if (current)
    nodeFail("value '" + name + "' is never defined");
  fail("value '" + name + "' is never defined");
}

Value Importer::input(int idx) {
  if (idx >= current->proto->input_size() || current->proto->input(idx).empty())
    nodeFail("missing input " + Twine(idx));
  return get(current->proto->input(idx));
}

Value Importer::getOptional(int idx) {
  if (idx >= current->proto->input_size() || current->proto->input(idx).empty())
    return Value();
  return get(current->proto->input(idx));
}

const StaticTensor &Importer::staticInput(int idx, const Twine &what) {
  const std::string &name = current->proto->input(idx);
  auto it = statics.find(name);
  if (it == statics.end()) {
    // A float initializer used both statically and as a tensor is a param
    // argument; its values are still known.
    for (const onnx::TensorProto &init : model.graph().initializer()) {
      if (init.name() != name)
        continue;
      auto t = std::make_unique<StaticTensor>(
          decodeTensor(init, "initializer '" + name + "'",
                       NameLoc::get(builder.getStringAttr(name))));
      return *(statics[name] = std::move(t));
    }
    nodeFail(what + " '" + name + "' is not a constant");
  }
  return *it->second;
}

void Importer::define(int outputIdx, Value v) {
  if (outputIdx < current->proto->output_size() &&
      !current->proto->output(outputIdx).empty())
    values[current->proto->output(outputIdx)] = v;
}

bool Importer::outputUsed(int idx) const {
  return idx < current->proto->output_size() &&
         !current->proto->output(idx).empty() &&
         used.contains(current->proto->output(idx));
}

Value Importer::scalarF32(float v) {
  auto type = RankedTensorType::get({}, builder.getF32Type());
  return builder.create<ConstantOp>(currentLoc, DenseElementsAttr::get(type, v))
      .getResult();
}

//===----------------------------------------------------------------------===//
// Current-node helpers
//===----------------------------------------------------------------------===//

void Importer::nodeFail(const Twine &msg) const {
  fail("node '" + current->name + "' (" + current->proto->op_type() +
       "): " + msg);
}

const onnx::AttributeProto *Importer::attr(StringRef name) const {
  for (const auto &a : current->proto->attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t Importer::attrInt(StringRef name, int64_t dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->i() : dflt;
}

float Importer::attrFloat(StringRef name, float dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string Importer::attrString(StringRef name, StringRef dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->s() : dflt.str();
}

ArrayRef<int64_t> Importer::shapeOf(Value v) const {
  return cast<RankedTensorType>(v.getType()).getShape();
}

Kind Importer::kindOfValue(Value v) const {
  Type t = getElementTypeOrSelf(v.getType());
  if (t.isF32())
    return Kind::F32;
  if (t.isInteger(64))
    return Kind::I64;
  if (t.isInteger(32))
    return Kind::I32;
  return Kind::I1;
}

Value Importer::requireFloat(Value v, const Twine &what) const {
  if (kindOfValue(v) != Kind::F32)
    nodeFail(what + " must be a float tensor, got " + [&] {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << v.getType();
      return s;
    }());
  return v;
}

RankedTensorType Importer::tensorType(ArrayRef<int64_t> shape,
                                      Type element) const {
  return RankedTensorType::get(shape, element);
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

void Importer::importNode(const NodeInfo &node) {
  current = &node;
  currentLoc = NameLoc::get(builder.getStringAttr(node.name));
  StringRef op = node.proto->op_type();
  if (op == "MatMul")
    importMatMul();
  else if (op == "Gemm")
    importGemm();
  else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div")
    importBinary();
  else if (op == "Neg" || op == "Exp" || op == "Log" || op == "Tanh" ||
           op == "Relu")
    importUnary();
  else if (op == "Transpose")
    importTranspose();
  else if (op == "Reshape")
    importReshape();
  else if (op == "Identity")
    define(0, input(0));
  else if (op == "Dropout")
    importDropout();
  else if (op == "SoftmaxCrossEntropyLoss")
    importSoftmaxCrossEntropy();
  else if (op == "Constant")
    importConstant();
  else
    nodeFail("unsupported op"); // prescan rejects these first.
}

void Importer::importMatMul() {
  Value a = requireFloat(input(0), "A"), b = requireFloat(input(1), "B");
  ArrayRef<int64_t> as = shapeOf(a), bs = shapeOf(b);
  if (as.empty() || bs.empty())
    nodeFail("operands must have rank >= 1, got " + shapeStr(as) + " x " +
             shapeStr(bs));
  // numpy rules: a 1-D lhs is a row [1, K], a 1-D rhs a column [K, 1]; the
  // added dimension is removed from the result.
  SmallVector<int64_t> a2(as), b2(bs);
  if (as.size() == 1)
    a2.insert(a2.begin(), 1);
  if (bs.size() == 1)
    b2.push_back(1);
  if (a2.back() != b2[b2.size() - 2])
    nodeFail("contracting dimensions differ: " + shapeStr(as) + " x " +
             shapeStr(bs));
  auto batch = broadcastShapes(ArrayRef<int64_t>(a2).drop_back(2),
                               ArrayRef<int64_t>(b2).drop_back(2));
  if (!batch)
    nodeFail("batch dimensions do not broadcast: " + shapeStr(as) + " x " +
             shapeStr(bs));
  Type f32 = builder.getF32Type();
  if (as.size() == 1)
    a = builder.create<ReshapeOp>(currentLoc, tensorType(a2, f32), a);
  if (bs.size() == 1)
    b = builder.create<ReshapeOp>(currentLoc, tensorType(b2, f32), b);
  SmallVector<int64_t> r(*batch);
  r.push_back(a2[a2.size() - 2]);
  r.push_back(b2.back());
  Value y = builder.create<MatMulOp>(currentLoc, tensorType(r, f32), a, b);
  SmallVector<int64_t> final(*batch);
  if (as.size() != 1)
    final.push_back(a2[a2.size() - 2]);
  if (bs.size() != 1)
    final.push_back(b2.back());
  if (final != r)
    y = builder.create<ReshapeOp>(currentLoc, tensorType(final, f32), y);
  define(0, y);
}

void Importer::importGemm() {
  Value a = requireFloat(input(0), "A"), b = requireFloat(input(1), "B");
  Value c = getOptional(2);
  ArrayRef<int64_t> as = shapeOf(a), bs = shapeOf(b);
  if (as.size() != 2 || bs.size() != 2)
    nodeFail("A and B must be 2-D, got " + shapeStr(as) + " and " +
             shapeStr(bs));
  bool ta = attrInt("transA", 0) != 0, tb = attrInt("transB", 0) != 0;
  float alpha = attrFloat("alpha", 1.0f), beta = attrFloat("beta", 1.0f);
  int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1];
  int64_t kb = tb ? bs[1] : bs[0], n = tb ? bs[0] : bs[1];
  if (k != kb)
    nodeFail("contracting dimensions differ: " + shapeStr(as) + " x " +
             shapeStr(bs) + " (transA=" + Twine(int(ta)) +
             ", transB=" + Twine(int(tb)) + ")");
  Type f32 = builder.getF32Type();
  SmallVector<int64_t> r = {m, n};
  Value y =
      builder.create<MatMulOp>(currentLoc, tensorType(r, f32), a, b, ta, tb);
  if (alpha != 1.0f)
    y = builder.create<MulOp>(currentLoc, y.getType(), y, scalarF32(alpha));
  if (c && beta != 0.0f) {
    requireFloat(c, "C");
    auto bc = broadcastShapes(shapeOf(c), r);
    if (!bc || ArrayRef<int64_t>(*bc) != ArrayRef<int64_t>(r))
      nodeFail("C " + shapeStr(shapeOf(c)) + " does not broadcast to " +
               shapeStr(r));
    if (beta != 1.0f)
      c = builder.create<MulOp>(currentLoc, c.getType(), c, scalarF32(beta));
    y = builder.create<AddOp>(currentLoc, y.getType(), y, c);
  }
  define(0, y);
}

void Importer::importBinary() {
  Value a = input(0), b = input(1);
  if (getElementTypeOrSelf(a.getType()) != getElementTypeOrSelf(b.getType())) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "operand element types differ: " << a.getType() << " and "
       << b.getType();
    nodeFail(s);
  }
  auto shape = broadcastShapes(shapeOf(a), shapeOf(b));
  if (!shape)
    nodeFail("operands " + shapeStr(shapeOf(a)) + " and " +
             shapeStr(shapeOf(b)) + " do not broadcast");
  Type type = tensorType(*shape, getElementTypeOrSelf(a.getType()));
  StringRef op = current->proto->op_type();
  Value y;
  if (op == "Add")
    y = builder.create<AddOp>(currentLoc, type, a, b);
  else if (op == "Sub")
    y = builder.create<SubOp>(currentLoc, type, a, b);
  else if (op == "Mul")
    y = builder.create<MulOp>(currentLoc, type, a, b);
  else
    y = builder.create<DivOp>(currentLoc, type, a, b);
  define(0, y);
}

void Importer::importUnary() {
  Value x = requireFloat(input(0), "the input");
  StringRef op = current->proto->op_type();
  Value y;
  if (op == "Neg")
    y = builder.create<NegOp>(currentLoc, x);
  else if (op == "Exp")
    y = builder.create<ExpOp>(currentLoc, x);
  else if (op == "Log")
    y = builder.create<LogOp>(currentLoc, x);
  else if (op == "Tanh")
    y = builder.create<TanhOp>(currentLoc, x);
  else
    y = builder.create<ReluOp>(currentLoc, x);
  define(0, y);
}

void Importer::importTranspose() {
  Value x = input(0);
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size();
  SmallVector<int64_t> perm;
  if (const onnx::AttributeProto *a = attr("perm"))
    perm.assign(a->ints().begin(), a->ints().end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<bool> seen(rank, false);
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < rank && !seen[p];
    if (ok)
      seen[p] = true;
  }
  if (!ok)
    nodeFail("perm " + shapeStr(perm) + " is not a permutation of the input " +
             shapeStr(in));
  SmallVector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(in[p]);
  define(0, builder.create<TransposeOp>(
                currentLoc, tensorType(out, getElementTypeOrSelf(x.getType())),
                x, perm));
}

void Importer::importReshape() {
  Value x = input(0);
  if (current->proto->input_size() < 2 || current->proto->input(1).empty())
    nodeFail("missing the shape input");
  const std::string &shapeName = current->proto->input(1);
  if (!statics.count(shapeName) && values.count(shapeName))
    nodeFail("shape '" + shapeName + "' is not a constant");
  const StaticTensor &shape = staticInput(1, "shape");
  if (shape.kind != Kind::I64 || shape.shape.size() != 1)
    nodeFail("shape '" + shapeName + "' must be a 1-D int64 tensor");
  bool allowZero = attrInt("allowzero", 0) != 0;
  ArrayRef<int64_t> in = shapeOf(x);
  SmallVector<int64_t> out;
  std::optional<size_t> inferred;
  for (auto [i, s] : llvm::enumerate(shape.ints)) {
    if (s == 0 && !allowZero) {
      if (i >= in.size())
        nodeFail("shape " + shapeStr(shape.ints) + " copies dimension " +
                 Twine(i) + " but the input " + shapeStr(in) + " has rank " +
                 Twine(in.size()));
      out.push_back(in[i]);
    } else if (s == -1) {
      if (inferred)
        nodeFail("shape " + shapeStr(shape.ints) + " has more than one -1");
      inferred = i;
      out.push_back(1);
    } else if (s < 0) {
      nodeFail("shape " + shapeStr(shape.ints) + " has a negative size");
    } else {
      out.push_back(s);
    }
  }
  int64_t total = numElements(in);
  if (inferred) {
    int64_t known = numElements(out);
    if (known == 0 || total % known != 0)
      nodeFail("cannot reshape " + shapeStr(in) + " to " +
               shapeStr(shape.ints));
    out[*inferred] = total / known;
  }
  if (numElements(out) != total)
    nodeFail("cannot reshape " + shapeStr(in) + " to " + shapeStr(shape.ints));
  define(0, builder.create<ReshapeOp>(
                currentLoc, tensorType(out, getElementTypeOrSelf(x.getType())),
                x));
}

void Importer::importDropout() {
  Value x = requireFloat(input(0), "the data input");
  auto readScalar = [&](int idx, StringRef what) -> std::optional<double> {
    if (idx >= current->proto->input_size() ||
        current->proto->input(idx).empty())
      return std::nullopt;
    const StaticTensor &t = staticInput(idx, what);
    if (t.size() != 1)
      nodeFail(what + " '" + current->proto->input(idx) + "' must be a scalar");
    return t.kind == Kind::F32 ? widenFloat(t.floats[0]) : double(t.ints[0]);
  };
  double ratio = readScalar(1, "ratio").value_or(0.5);
  bool training = readScalar(2, "training_mode").value_or(0.0) != 0.0;
  if (!(ratio >= 0.0 && ratio < 1.0))
    nodeFail("ratio " + std::to_string(ratio) + " is not in [0, 1)");

  auto maskType = tensorType(shapeOf(x), builder.getI1Type());
  if (!training || ratio == 0.0) {
    define(0, x);
    if (outputUsed(1))
      define(1, builder.create<ConstantOp>(
                    currentLoc, DenseElementsAttr::get(maskType, true)));
    return;
  }
  if (!rngKeyArg) {
    Value key =
        entry->addArgument(RankedTensorType::get({}, builder.getI64Type()),
                           NameLoc::get(builder.getStringAttr("rng_key")));
    rngKeyArg = cast<BlockArgument>(key).getArgNumber();
  }
  auto op = builder.create<DropoutOp>(
      currentLoc, x.getType(), maskType, x, entry->getArgument(*rngKeyArg),
      builder.getF64FloatAttr(ratio),
      builder.getI64IntegerAttr(dropoutStream++));
  define(0, op.getOutput());
  define(1, op.getMask());
}

void Importer::importSoftmaxCrossEntropy() {
  Value scores = requireFloat(input(0), "scores");
  Value labels = input(1);
  if (getOptional(2))
    nodeFail("the weights input is not supported yet");
  if (outputUsed(1))
    nodeFail("the log_prob output '" + current->proto->output(1) +
             "' is not supported yet");
  ArrayRef<int64_t> s = shapeOf(scores), l = shapeOf(labels);
  Kind lk = kindOfValue(labels);
  if (lk != Kind::I64 && lk != Kind::I32)
    nodeFail("labels must be int64 or int32");
  if (s.size() != 2 || l.size() != 1 || l[0] != s[0])
    nodeFail("expects scores [N, C] and labels [N], got " + shapeStr(s) +
             " and " + shapeStr(l) + " (other ranks are not supported yet)");
  std::string reduction = attrString("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    nodeFail("reduction '" + reduction + "' is not mean, sum or none");
  IntegerAttr ignore;
  if (const onnx::AttributeProto *a = attr("ignore_index"))
    ignore = builder.getI64IntegerAttr(a->i());
  SmallVector<int64_t> out;
  if (reduction == "none")
    out.push_back(s[0]);
  define(0, builder.create<SoftmaxCrossEntropyOp>(
                currentLoc, tensorType(out, builder.getF32Type()), scores,
                labels, reduction, ignore));
}

void Importer::importConstant() {
  if (current->proto->attribute_size() != 1)
    nodeFail("expects exactly one value attribute");
  const onnx::AttributeProto &a = current->proto->attribute(0);
  auto t = std::make_unique<StaticTensor>(currentLoc);
  StringRef name = a.name();
  if (name == "value") {
    *t = decodeTensor(a.t(), "node '" + current->name + "' (Constant): value",
                      currentLoc);
  } else if (name == "value_float") {
    t->floats = {a.f()};
  } else if (name == "value_floats") {
    t->floats.assign(a.floats().begin(), a.floats().end());
    t->shape = {static_cast<int64_t>(t->floats.size())};
  } else if (name == "value_int") {
    t->kind = Kind::I64;
    t->ints = {a.i()};
  } else if (name == "value_ints") {
    t->kind = Kind::I64;
    t->ints.assign(a.ints().begin(), a.ints().end());
    t->shape = {static_cast<int64_t>(t->ints.size())};
  } else {
    nodeFail("attribute '" + name + "' is not supported");
  }
  if (current->proto->output_size() < 1 || current->proto->output(0).empty())
    return;
  statics[current->proto->output(0)] = std::move(t);
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> Importer::run() {
  load();
  checkHeader();
  prescan();
  runChecker();

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

} // namespace

OwningOpRef<ModuleOp>
importOnnxModel(MLIRContext &context, StringRef path,
                const ImportOptions &options, std::string &error,
                std::vector<InitializerData> *initializers) {
  context.loadDialect<OtcDialect, func::FuncDialect>();
  if (initializers)
    initializers->clear();
  try {
    Importer importer(context, path, options, initializers);
    return importer.run();
  } catch (const ImportError &e) {
    error = e.what();
  } catch (const std::exception &e) {
    error = "while importing '" + path.str() + "': " + oneLine(e.what());
  } catch (...) {
    error = "while importing '" + path.str() + "': unknown exception";
  }
  if (initializers)
    initializers->clear();
  return nullptr;
}

} // namespace otc
