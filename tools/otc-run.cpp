//===- otc-run.cpp - the reference interpreter driver ---------------------===//
//
// Two modes on the reference interpreter (interp/):
//
//   otc-run MODEL.onnx --inputs IN.safetensors --outputs OUT.safetensors
//           [--dim NAME=VALUE]... [--micro-batch N] [--rng-key K] [--f64]
//     imports the model, binds the graph inputs from IN (by graph input name;
//     a float input may come in any float dtype and is rounded to its
//     argument's type, since the importer may compute an f64 or f16 ONNX
//     input in f32; a [1] tensor binds a scalar input; an input that an op
//     needs at import time, such as a Reshape shape, Slice starts, reduction
//     axes, Trilu's k or Dropout's ratio, becomes a constant holding its IN
//     value), the float initializers from the model and the random
//     key, runs @forward and writes every graph output, named after it, to
//     OUT: floats as F32 (F64 for f64 results or with --f64), i64 as I64,
//     i32 as I32, i1 (Equal, masks) as BOOL.
//
//   otc-run FILE.mlir --inputs IN --outputs OUT [--func NAME] [--rng-key K]
//           [--round-bf16]
//     runs one function (default @forward) of a textual module: arguments
//     by their otc.input / otc.param name (else "argN"), results named by
//     otc.output, "grad/<param>", "loss" (else "resultN"). For tests of the
//     ops that ONNX has no node test for (dropout masks, AdamW, gradients).
//     --round-bf16 rounds every BF16 result as it is computed, as a compiled
//     program stores it (the IR after otc-mixed-precision).
//
//   otc-run MODEL.onnx --generate N --prompt-ids A,B,... [--temperature T]
//           [--top-k K] [--top-p P] [--seed S] [--logits NAME]
//     text generation from a language model (an otc-export'ed model with its
//     logits as an output): imports it at micro-batch 1 once, then N times
//     runs @forward on the last T ids (T: the model's sequence length; the
//     window padded with zeros after them, which a causal model does not
//     look at), takes the logits of the last id's position (the output
//     NAME, else the first float output), and draws the next id from their
//     softmax at temperature T (0: the largest logit), among the K largest
//     (0: all) and the fewest largest whose probabilities reach P, with a
//     generator seeded by S; any other integer input (a loss's targets) is
//     zeros. Prints the prompt and the new ids on one line, space-separated.
//     No cache of keys and values: each id runs the whole window again.
//
//   otc-run FILE.mlir --check-gradients [--tol T] [--seed S]
//     parses a module holding @forward, builds @train_step with the
//     otc-differentiate pass when it is absent, and compares its gradients
//     with finite differences of @forward (interp/GradCheck.h).
//
// Every error is one line `otc-run: error: ...` and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "tools/ErrorLine.h"
#include "frontend/OnnxImporter.h"
#include "interp/GradCheck.h"
#include "interp/Interpreter.h"
#include "ir/OtcDialect.h"
#include "otcrt/safetensors.h"
#include "otcrt/sampling.h"
#include "passes/Passes.h"
#include "targets/Targets.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace mlir;
using otc::interp::Tensor;

namespace {

/// The parsed command line.
struct Options {
  std::string model;
  std::string inputs;
  std::string outputs;
  otc::ImportOptions import;
  int64_t rngKey = 0;
  bool f64 = false;
  bool roundBf16 = false;
  bool checkGradients = false;
  std::string funcName = "forward";
  otc::interp::GradCheckOptions gradCheck;
  // --generate: ids to add (0: not generating), the prompt, and the draw.
  int64_t generate = 0;
  std::vector<int64_t> promptIds;
  double temperature = 1.0, topP = 1.0;
  int64_t topK = 0;
  bool seedGiven = false;
  std::string logitsName;
};

} // namespace

/// Prints `otc-run: error: <message>` and returns exit status 1.
static int fail(const llvm::Twine &message) {
  llvm::errs() << "otc-run: error: " << message << "\n";
  return 1;
}

static const char kUsage[] =
    "usage: otc-run MODEL.onnx --inputs IN.safetensors --outputs "
    "OUT.safetensors [--dim NAME=VALUE]... [--micro-batch N] [--rng-key K] "
    "[--f64]\n"
    "       otc-run FILE.mlir --inputs IN.safetensors --outputs "
    "OUT.safetensors [--func NAME] [--rng-key K] [--f64] [--round-bf16]\n"
    "       otc-run MODEL.onnx --generate N --prompt-ids A,B,... "
    "[--temperature T] [--top-k K] [--top-p P] [--seed S] [--logits NAME]\n"
    "       otc-run FILE.mlir --check-gradients [--tol T] [--seed S]\n";

/// Parses argv into `options`; returns an error message or "".
/// Reads a flag's value (`--flag value` or `--flag=value`) into its
/// argument; false when there is none.
using FlagValue = llvm::function_ref<bool(llvm::StringRef &)>;

/// The flags of what runs and on what: the error for a bad value, "" when
/// `flag` is one of them and good, nullopt when it is not one of them.
static std::optional<std::string>
parseRunFlag(llvm::StringRef flag, FlagValue value, Options &options) {
  llvm::StringRef v;
  if (flag == "--inputs" || flag == "--outputs") {
    if (!value(v))
      return (flag + " needs a file name").str();
    (flag == "--inputs" ? options.inputs : options.outputs) = v.str();
  } else if (flag == "--func") {
    if (!value(v) || v.empty())
      return "--func needs a function name";
    options.funcName = v.str();
  } else if (flag == "--dim") {
    if (!value(v))
      return "--dim needs NAME=VALUE";
    if (!options.import.bindDim(v))
      return ("--dim wants NAME=VALUE with a positive VALUE, got '" + v + "'")
          .str();
  } else if (flag == "--micro-batch") {
    int64_t n;
    if (!value(v) || v.getAsInteger(10, n) || n <= 0)
      return "--micro-batch needs a positive integer";
    options.import.microBatch = n;
  } else if (flag == "--rng-key") {
    if (!value(v) || v.getAsInteger(10, options.rngKey))
      return "--rng-key needs an integer";
  } else if (flag == "--seed") {
    unsigned long long seed;
    if (!value(v) || v.getAsInteger(10, seed))
      return "--seed needs a non-negative integer";
    options.gradCheck.seed = seed;
    options.seedGiven = true;
  } else if (flag == "--tol") {
    if (!value(v) || v.getAsDouble(options.gradCheck.tol) ||
        !(options.gradCheck.tol > 0))
      return "--tol needs a positive number";
  } else {
    return std::nullopt;
  }
  return std::string();
}

/// The flags of --generate, as parseRunFlag.
static std::optional<std::string>
parseGenerateFlag(llvm::StringRef flag, FlagValue value, Options &options) {
  llvm::StringRef v;
  if (flag == "--generate") {
    if (!value(v) || v.getAsInteger(10, options.generate) ||
        options.generate <= 0)
      return "--generate needs a positive number of ids";
  } else if (flag == "--prompt-ids") {
    if (!value(v) || v.empty())
      return "--prompt-ids needs ids: A,B,...";
    llvm::SmallVector<llvm::StringRef> parts;
    v.split(parts, ',');
    for (llvm::StringRef part : parts) {
      int64_t id;
      if (part.trim().getAsInteger(10, id) || id < 0)
        return ("--prompt-ids: '" + part + "' is not a token id").str();
      options.promptIds.push_back(id);
    }
  } else if (flag == "--temperature") {
    if (!value(v) || v.getAsDouble(options.temperature) ||
        !(options.temperature >= 0))
      return "--temperature needs a number >= 0";
  } else if (flag == "--top-k") {
    if (!value(v) || v.getAsInteger(10, options.topK) || options.topK < 0)
      return "--top-k needs an integer >= 0";
  } else if (flag == "--top-p") {
    if (!value(v) || v.getAsDouble(options.topP) ||
        !(options.topP > 0 && options.topP <= 1))
      return "--top-p needs a number in (0, 1]";
  } else if (flag == "--logits") {
    if (!value(v) || v.empty())
      return "--logits needs an output name";
    options.logitsName = v.str();
  } else {
    return std::nullopt;
  }
  return std::string();
}

/// What the options ask together: "" or the error.
static std::string checkOptions(const Options &options) {
  if (options.model.empty())
    return "no model file given (otc-run --help)";
  if (options.generate && options.promptIds.empty())
    return "--generate needs --prompt-ids A,B,... (at least one id)";
  if (!options.generate && !options.promptIds.empty())
    return "--prompt-ids needs --generate N";
  if (!options.checkGradients && !options.generate && options.outputs.empty())
    return "--outputs OUT.safetensors is required";
  return "";
}

static std::string parseArgs(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    // Accept both `--flag value` and `--flag=value`.
    llvm::StringRef flag = arg, inlineValue;
    bool hasInline = false;
    if (arg.starts_with("--") && arg.contains('=')) {
      std::tie(flag, inlineValue) = arg.split('=');
      hasInline = true;
    }
    auto value = [&](llvm::StringRef &out) -> bool {
      if (hasInline) {
        out = inlineValue;
        return true;
      }
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::optional<std::string> error = parseRunFlag(flag, value, options);
    if (!error)
      error = parseGenerateFlag(flag, value, options);
    if (error) {
      if (!error->empty())
        return *error;
    } else if (arg == "--f64") {
      options.f64 = true;
    } else if (arg == "--round-bf16") {
      options.roundBf16 = true;
    } else if (arg == "--check-gradients") {
      options.checkGradients = true;
    } else if (arg == "--help" || arg == "-h") {
      llvm::outs() << kUsage;
      std::exit(0);
    } else if (arg.starts_with("-")) {
      return ("unknown option '" + arg + "'").str();
    } else if (options.model.empty()) {
      options.model = arg.str();
    } else {
      return ("unexpected argument '" + arg + "'").str();
    }
  }
  return checkOptions(options);
}

/// Prints every error diagnostic as one line `otc-run: error: LOC: MESSAGE`,
/// where LOC is the ONNX node name or file:line:col.
static LogicalResult printDiagnostic(Diagnostic &diag) {
  // Only the first error: the ones after it follow from it.
  static bool printed = false;
  if (diag.getSeverity() != DiagnosticSeverity::Error || printed)
    return success();
  printed = true;
  llvm::errs() << "otc-run: error: " << otc::errorLine(diag) << "\n";
  return success();
}

//===----------------------------------------------------------------------===//
// Safetensors <-> interpreter tensors
//===----------------------------------------------------------------------===//

/// The safetensors dtype that an argument of element type `type` is read
/// from, or nullopt when there is none.
static std::optional<otcrt::StDType> inputDType(Type type) {
  if (type.isF32())
    return otcrt::StDType::F32;
  if (type.isF64())
    return otcrt::StDType::F64;
  if (type.isF16())
    return otcrt::StDType::F16;
  if (type.isBF16())
    return otcrt::StDType::BF16;
  if (type.isInteger(64))
    return otcrt::StDType::I64;
  if (type.isInteger(32))
    return otcrt::StDType::I32;
  if (type.isInteger(1))
    return otcrt::StDType::BOOL;
  return std::nullopt;
}

/// True for the float safetensors dtypes (F16, BF16, F32, F64).
static bool isFloatDType(otcrt::StDType dtype) {
  return dtype == otcrt::StDType::F16 || dtype == otcrt::StDType::BF16 ||
         dtype == otcrt::StDType::F32 || dtype == otcrt::StDType::F64;
}

/// Rounds every value to the nearest one of float type `type` (a float
/// input given in another float dtype than its argument's, e.g. the f64 data
/// of an ONNX input that the importer computes in f32).
static void roundToFloatType(std::vector<double> &values, FloatType type) {
  if (type.isF64())
    return;
  for (double &x : values) {
    llvm::APFloat f(x);
    bool losesInfo = false;
    f.convert(type.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
              &losesInfo);
    x = f.convertToDouble();
  }
}

/// Reads element `i` of raw little-endian data of type `T`.
template <typename T>
static T loadAt(const std::vector<uint8_t> &bytes, size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

/// Converts a safetensors tensor of one of the dtypes of inputDType to
/// doubles.
static std::vector<double> toDoubles(const otcrt::Tensor &t) {
  std::vector<double> out(t.numel());
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
    case otcrt::StDType::F32:
      out[i] = loadAt<float>(t.data, i);
      break;
    case otcrt::StDType::F64:
      out[i] = loadAt<double>(t.data, i);
      break;
    case otcrt::StDType::F16:
      out[i] = llvm::APFloat(llvm::APFloat::IEEEhalf(),
                             llvm::APInt(16, loadAt<uint16_t>(t.data, i)))
                   .convertToDouble();
      break;
    case otcrt::StDType::BF16:
      out[i] = llvm::APFloat(llvm::APFloat::BFloat(),
                             llvm::APInt(16, loadAt<uint16_t>(t.data, i)))
                   .convertToDouble();
      break;
    case otcrt::StDType::I64:
      out[i] = static_cast<double>(loadAt<int64_t>(t.data, i));
      break;
    case otcrt::StDType::I32:
      out[i] = loadAt<int32_t>(t.data, i);
      break;
    default: // BOOL
      out[i] = t.data[i] ? 1.0 : 0.0;
      break;
    }
  }
  return out;
}

/// Appends result `value` of element type `type` to `file` as `name`: floats
/// as F32 (F64 for f64 results or with `f64`), i64 as I64, i32 as I32, i1 as
/// BOOL.
static void addOutput(otcrt::TensorFile &file, const std::string &name,
                      Type type, const Tensor &value, bool f64) {
  std::vector<uint8_t> bytes;
  auto append = [&](auto v) {
    const auto *p = reinterpret_cast<const uint8_t *>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(v));
  };
  otcrt::StDType dtype;
  if (isa<FloatType>(type) && (f64 || type.isF64())) {
    dtype = otcrt::StDType::F64;
    for (double x : value.data)
      append(x);
  } else if (isa<FloatType>(type)) {
    dtype = otcrt::StDType::F32;
    for (double x : value.data)
      append(static_cast<float>(x));
  } else if (type.isInteger(1)) {
    dtype = otcrt::StDType::BOOL;
    for (double x : value.data)
      append(static_cast<uint8_t>(x != 0.0));
  } else if (type.isInteger(32)) {
    dtype = otcrt::StDType::I32;
    for (double x : value.data)
      append(static_cast<int32_t>(x));
  } else {
    dtype = otcrt::StDType::I64;
    for (double x : value.data)
      append(static_cast<int64_t>(x));
  }
  file.add(name, dtype, value.shape, bytes.data());
}

//===----------------------------------------------------------------------===//
// The two modes
//===----------------------------------------------------------------------===//

/// The name an argument of `func` is bound by: its otc.input or otc.param
/// name, else "argN".
static std::string argumentName(func::FuncOp func, unsigned index) {
  for (const char *attr : {otc::attrs::kInput, otc::attrs::kParam})
    if (auto name = func.getArgAttrOfType<StringAttr>(index, attr))
      return name.getValue().str();
  return "arg" + std::to_string(index);
}

/// The name result `index` of `func` is written as: its otc.output name,
/// "grad/<param>" for otc.grad, "loss" for otc.loss, else "resultN".
static std::string resultName(func::FuncOp func, unsigned index) {
  if (auto attr =
          func.getResultAttrOfType<StringAttr>(index, otc::attrs::kOutput))
    return attr.getValue().str();
  if (auto attr =
          func.getResultAttrOfType<StringAttr>(index, otc::attrs::kGrad))
    return "grad/" + attr.getValue().str();
  if (func.getResultAttr(index, otc::attrs::kLoss))
    return "loss";
  return "result" + std::to_string(index);
}

/// Fails (returns the message) when a value of `func` would not fit in this
/// machine's memory as the interpreter's doubles: checked before anything is
/// allocated, so that a huge dimension is an error naming the value rather
/// than an out-of-memory abort.
static std::string checkMemory(func::FuncOp func) {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return "";
  uint64_t memory = static_cast<uint64_t>(pages) * pageSize;
  auto check = [&](Value v, const std::string &name) -> std::string {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type)
      return "";
    uint64_t bytes = sizeof(double);
    for (int64_t d : type.getShape())
      if (d < 0 ||
          __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
        bytes = UINT64_MAX;
    if (bytes <= memory)
      return "";
    std::string typeText;
    llvm::raw_string_ostream os(typeText);
    os << type;
    return "value '" + name + "' (" + typeText + ") needs " +
           (bytes == UINT64_MAX ? std::string("more than 2^64")
                                : std::to_string(bytes)) +
           " bytes in the interpreter, more than this machine's " +
           std::to_string(memory) + " bytes of memory";
  };
  for (BlockArgument arg : func.getArguments()) {
    std::string name = "arg" + std::to_string(arg.getArgNumber());
    if (auto n = dyn_cast<NameLoc>(arg.getLoc()))
      name = n.getName().str();
    if (std::string err = check(arg, name); !err.empty())
      return err;
  }
  std::string err;
  func.walk([&](Operation *op) {
    std::string name = op->getName().getStringRef().str();
    if (auto n = dyn_cast<NameLoc>(op->getLoc()))
      name = n.getName().str();
    for (Value r : op->getResults())
      if (err.empty())
        err = check(r, name);
    return err.empty() ? WalkResult::advance() : WalkResult::interrupt();
  });
  return err;
}

/// Binds the arguments of `func` (parameters from `initializers` when they
/// are there, the random key from --rng-key unless the inputs file has it,
/// everything else from `inputs`, read from --inputs, by argumentName), runs
/// it and writes its results to --outputs.
static int runAndWrite(func::FuncOp func, const Options &options,
                       std::vector<otc::InitializerData> &&initializers,
                       const otcrt::TensorFile &inputs) {
  if (std::string err = checkMemory(func); !err.empty())
    return fail(err);
  std::map<std::string, otc::InitializerData *> initByName;
  for (otc::InitializerData &init : initializers)
    initByName[init.name] = &init;

  std::vector<Tensor> args;
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    auto type = cast<RankedTensorType>(arg.getType());
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    std::string name = argumentName(func, index);
    Tensor value;
    value.shape = shape;
    auto init = initByName.find(name);
    const otcrt::Tensor *t = inputs.find(name);
    if (func.getArgAttr(index, otc::attrs::kParam) &&
        init != initByName.end()) {
      if (init->second->shape != shape)
        return fail("initializer '" + name + "' has shape " +
                    otcrt::formatShape(init->second->shape) +
                    ", its argument expects " + otcrt::formatShape(shape));
      value.data.assign(init->second->values.begin(),
                        init->second->values.end());
      // The float copy is not read again: the weights are held once.
      std::vector<float>().swap(init->second->values);
    } else if (func.getArgAttr(index, otc::attrs::kRngKey) && !t) {
      value.data.assign(type.getNumElements(),
                        static_cast<double>(options.rngKey));
    } else {
      if (!t && options.inputs.empty())
        return fail("input '" + name + "' needs --inputs IN.safetensors");
      if (!t)
        return fail("input '" + name + "' is missing from " + options.inputs);
      std::optional<otcrt::StDType> want = inputDType(type.getElementType());
      bool floatToFloat = want && isFloatDType(*want) && isFloatDType(t->dtype);
      if (!want || (t->dtype != *want && !floatToFloat))
        return fail("input '" + name + "' has dtype " +
                    otcrt::dtypeName(t->dtype) + ", the model expects " +
                    (want ? otcrt::dtypeName(*want) : "an unsupported type"));
      // A one-element [1] tensor binds a scalar, as numpy would take it.
      bool scalarFromOne = shape.empty() && t->shape == std::vector<int64_t>{1};
      if (t->shape != shape && !scalarFromOne)
        return fail("input '" + name + "' has shape " +
                    otcrt::formatShape(t->shape) + ", the model expects " +
                    otcrt::formatShape(shape));
      value.data = toDoubles(*t);
      if (t->dtype != *want)
        roundToFloatType(value.data, cast<FloatType>(type.getElementType()));
    }
    args.push_back(std::move(value));
  }

  FailureOr<std::vector<Tensor>> results =
      otc::interp::runFunction(func, std::move(args), options.roundBf16);
  if (failed(results))
    return 1; // The diagnostic handler printed the error.

  otcrt::TensorFile outputs;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    Type elementType = getElementTypeOrSelf(func.getResultTypes()[i]);
    addOutput(outputs, resultName(func, i), elementType, (*results)[i],
              options.f64);
  }
  otcrt::Status status = otcrt::writeSafetensors(options.outputs, outputs);
  if (!status)
    return fail(status.message());
  return 0;
}

/// Sets `value` to tensor `name` of `inputs` and returns true when the file
/// has it in a dtype toDoubles reads (any other one is reported when the
/// input is bound as an argument).
static bool findInput(const otcrt::TensorFile &inputs, const std::string &name,
                      otc::BoundInput &value) {
  const otcrt::Tensor *t = inputs.find(name);
  if (!t ||
      (!isFloatDType(t->dtype) && t->dtype != otcrt::StDType::I64 &&
       t->dtype != otcrt::StDType::I32 && t->dtype != otcrt::StDType::BOOL))
    return false;
  value.shape = t->shape;
  value.values = toDoubles(*t);
  value.isFloat = isFloatDType(t->dtype);
  return true;
}

/// Reads --inputs, when given, into `inputs`; returns an error or "".
static std::string readInputs(const Options &options,
                              otcrt::TensorFile &inputs) {
  if (options.inputs.empty())
    return "";
  otcrt::Status status = otcrt::readSafetensors(options.inputs, inputs);
  return status ? "" : status.message();
}

static int generateIds(func::FuncOp forward, const Options &options,
                       const std::vector<otc::InitializerData> &initializers);

/// Imports the ONNX model and runs its @forward. Graph inputs that an op
/// needs at import time (shapes, axes, k, ratio) are bound from --inputs.
static int runOnnxModel(MLIRContext &context, const Options &options) {
  otcrt::TensorFile inputs;
  std::string error = readInputs(options, inputs);
  if (!error.empty())
    return fail(error);
  otc::ImportOptions importOptions = options.import;
  importOptions.inputValue = [&inputs](const std::string &name,
                                       otc::BoundInput &value) {
    return findInput(inputs, name, value);
  };
  std::vector<otc::InitializerData> initializers;
  OwningOpRef<ModuleOp> module = otc::importOnnxModel(
      context, options.model, importOptions, error, &initializers);
  if (!module)
    return fail(error.empty() ? "cannot import " + options.model : error);
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return fail("the imported module has no @forward");
  if (options.generate)
    return generateIds(forward, options, initializers);
  return runAndWrite(forward, options, std::move(initializers), inputs);
}

/// --generate: the token input of `forward` ([1, T] integers) filled with
/// the last T ids, every other integer input (an attention mask) ones, the
/// parameters from
/// `initializers`; the next id drawn from the logits at the last id.
static int generateIds(func::FuncOp forward, const Options &options,
                       const std::vector<otc::InitializerData> &initializers) {
  if (std::string err = checkMemory(forward); !err.empty())
    return fail(err);
  std::map<std::string, const otc::InitializerData *> initByName;
  for (const otc::InitializerData &init : initializers)
    initByName[init.name] = &init;
  std::vector<Tensor> args;
  int tokensArg = -1;
  int64_t T = 0;
  for (BlockArgument arg : forward.getArguments()) {
    unsigned index = arg.getArgNumber();
    auto type = cast<RankedTensorType>(arg.getType());
    std::string name = argumentName(forward, index);
    Tensor value;
    value.shape.assign(type.getShape().begin(), type.getShape().end());
    auto init = initByName.find(name);
    if (forward.getArgAttr(index, otc::attrs::kParam) &&
        init != initByName.end()) {
      value.data.assign(init->second->values.begin(),
                        init->second->values.end());
    } else if (forward.getArgAttr(index, otc::attrs::kInput)) {
      if (!type.getElementType().isInteger())
        return fail("--generate takes token ids, but input '" + name +
                    "' is " + (type.getElementType().isF32() ? "f32" : "not integer"));
      if (tokensArg < 0) {
        if (type.getRank() != 2 || type.getShape()[0] != 1)
          return fail("--generate needs a token input of shape [1, T], got '" +
                      name + "' of " +
                      otcrt::formatShape(value.shape));
        tokensArg = static_cast<int>(index);
        T = type.getShape()[1];
        value.data.assign(type.getNumElements(), 0.0);
      } else {
        // Another integer input (an attention mask): ones, every position
        // attended, as `train --data` feeds it.
        value.data.assign(type.getNumElements(), 1.0);
      }
    } else if (forward.getArgAttr(index, otc::attrs::kRngKey)) {
      value.data.assign(type.getNumElements(),
                        static_cast<double>(options.rngKey));
    } else {
      return fail("--generate cannot bind argument '" + name + "'");
    }
    args.push_back(std::move(value));
  }
  if (tokensArg < 0)
    return fail("--generate needs an integer token input");
  int logitsResult = -1;
  for (unsigned i = 0; i < forward.getNumResults(); ++i) {
    auto type = dyn_cast<RankedTensorType>(forward.getResultTypes()[i]);
    bool named = !options.logitsName.empty() &&
                 resultName(forward, i) == options.logitsName;
    bool floatSeq = type && isa<FloatType>(type.getElementType()) &&
                    type.getRank() >= 2 && type.getRank() <= 3;
    if (named || (options.logitsName.empty() && floatSeq && logitsResult < 0))
      logitsResult = static_cast<int>(i);
  }
  if (logitsResult < 0)
    return fail(options.logitsName.empty()
                    ? "--generate needs the logits as an output ([1, T, V] "
                      "floats; otc-export --expose-logits)"
                    : "the model has no output '" + options.logitsName + "'");
  auto logitsType =
      cast<RankedTensorType>(forward.getResultTypes()[logitsResult]);
  const int64_t V = logitsType.getShape().back();
  if (logitsType.getNumElements() != T * V)
    return fail("output '" + resultName(forward, logitsResult) + "' of " +
                std::to_string(logitsType.getNumElements()) +
                " values is not [T = " + std::to_string(T) + ", V] logits");
  for (int64_t id : options.promptIds)
    if (id >= V)
      return fail("--prompt-ids: id " + std::to_string(id) +
                  " is outside the vocabulary of " + std::to_string(V));
  const otcrt::DrawRule rule{options.temperature, options.topK, options.topP};
  std::vector<int64_t> ids = options.promptIds;
  for (int64_t n = 0; n < options.generate; ++n) {
    int64_t start = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - T);
    int64_t len = static_cast<int64_t>(ids.size()) - start;
    Tensor &tokens = args[tokensArg];
    std::fill(tokens.data.begin(), tokens.data.end(), 0.0);
    for (int64_t t = 0; t < len; ++t)
      tokens.data[t] = static_cast<double>(ids[start + t]);
    FailureOr<std::vector<Tensor>> results =
        otc::interp::runFunction(forward, args);
    if (failed(results))
      return 1; // The diagnostic handler printed the error.
    const Tensor &logits = (*results)[logitsResult];
    std::vector<double> row(logits.data.begin() + (len - 1) * V,
                            logits.data.begin() + len * V);
    ids.push_back(otcrt::drawId(
        row.data(), V, rule,
        otcrt::drawUniform(options.gradCheck.seed, static_cast<uint64_t>(n))));
  }
  for (size_t i = 0; i < ids.size(); ++i)
    llvm::outs() << (i ? " " : "") << ids[i];
  llvm::outs() << "\n";
  return 0;
}

/// Parses a .mlir module and runs its function --func (default @forward).
static int runMlirModule(MLIRContext &context, const Options &options) {
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(options.model, &context);
  if (!module)
    return 1; // The diagnostic handler printed the error.
  auto func = module->lookupSymbol<func::FuncOp>(options.funcName);
  if (!func)
    return fail(options.model + " has no function @" + options.funcName);
  otcrt::TensorFile inputs;
  std::string error = readInputs(options, inputs);
  if (!error.empty())
    return fail(error);
  return runAndWrite(func, options, {}, inputs);
}

/// Parses the .mlir module, differentiates it when needed and runs the
/// gradient check.
static int checkGradients(MLIRContext &context, const Options &options) {
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(options.model, &context);
  if (!module)
    return 1; // The diagnostic handler printed the error.
  if (!module->lookupSymbol<func::FuncOp>("forward"))
    return fail(options.model + " has no @forward");
  if (!module->lookupSymbol<func::FuncOp>("train_step")) {
    PassManager pm(&context);
    pm.addPass(otc::createDifferentiate());
    if (failed(pm.run(*module)))
      return 1;
  }
  if (failed(otc::interp::checkGradients(*module, options.gradCheck,
                                         llvm::outs())))
    return 1;
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  otc::registerAllTargets();
  Options options;
  std::string error = parseArgs(argc, argv, options);
  if (!error.empty())
    return fail(error);

  DialectRegistry registry;
  registry.insert<otc::OtcDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  ScopedDiagnosticHandler handler(&context, printDiagnostic);

  llvm::StringRef model = options.model;
  if (options.checkGradients) {
    if (!model.ends_with(".mlir"))
      return fail("--check-gradients wants a .mlir file, got " + options.model);
    return checkGradients(context, options);
  }
  if (model.ends_with(".mlir")) {
    if (options.generate)
      return fail("--generate runs an ONNX model, not " + options.model);
    return runMlirModule(context, options);
  }
  // --generate runs one sequence at a time.
  if (options.generate && !options.import.microBatch)
    options.import.microBatch = 1;
  return runOnnxModel(context, options);
}
