//===- OnnxImporter.h - ONNX ModelProto to the otc dialect -------*- C++ -*-===//
//
// Reads an ONNX model (with external data) and builds a module holding one
// function, `@forward`, in the otc dialect. Graph inputs and float
// initializers become function arguments, graph outputs its results; every
// op's location is the name of the ONNX node it came from. Symbolic
// dimensions are bound at import, so the function is statically shaped;
// graph inputs that an op needs as constants can be bound to values too.
//
// This header is free of ONNX and protobuf types: the importer is compiled
// with exceptions (ONNX needs them) and catches them at this boundary.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_FRONTEND_ONNXIMPORTER_H
#define OTC_FRONTEND_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace otc {

/// The value of a graph input given before import (otc-run's --inputs).
struct BoundInput {
  std::vector<int64_t> shape;
  std::vector<double> values;
  /// Whether the values were given as floats (else integers or booleans).
  bool isFloat = false;
};

/// How symbolic dimensions (and import-time inputs) are bound.
struct ImportOptions {
  /// `--dim NAME=VALUE`: binds every dimension whose dim_param is NAME.
  std::map<std::string, int64_t> dims;
  /// `--micro-batch N`: binds the leading dimension of every graph input when
  /// it is symbolic (a dim_param not in `dims`, or unknown).
  std::optional<int64_t> microBatch;
  /// Set by importOnnxModel, not by callers: the batch F that the export
  /// fixed (a leading dimension of size F in every graph input that has
  /// one), which `microBatch` then replaces. Each graph output declared
  /// with leading dimension F must come out with the micro-batch, else the
  /// import fails (the graph holds F elsewhere: a Reshape's constant shape).
  std::optional<int64_t> fixedBatch;
  /// When set, asked for the value of every graph input that an op needs at
  /// import time (a Reshape shape, Slice starts, reduction axes, Trilu's k,
  /// Dropout's ratio...): when it returns true the input becomes a constant
  /// holding that value instead of an argument of @forward.
  std::function<bool(const std::string &name, BoundInput &value)> inputValue;
  /// `--train=REGEX`: float initializers whose names match are trained even
  /// where the import rules make them constants (a single element, values
  /// that are not finite). Empty: the rules alone.
  std::string train;
  /// Large trained parameters stored as external data are not held after
  /// the import's rules have read them: their InitializerData comes with
  /// `load` instead of values, to read them again one at a time (otc-compile
  /// writing init.safetensors; an 8B model's 32 GB never held at once).
  bool deferValues = false;

  /// Adds a `--dim` binding, "NAME=VALUE" with VALUE > 0, to `dims`; false
  /// (nothing added) for any other text.
  bool bindDim(llvm::StringRef binding) {
    auto [name, value] = binding.split('=');
    int64_t v;
    if (name.empty() || value.getAsInteger(10, v) || v <= 0)
      return false;
    dims[name.str()] = v;
    return true;
  }

  /// The value a symbolic dimension of a graph input takes: `dims` by its
  /// dim_param, else the micro-batch for the leading one (index 0); none
  /// when neither binds it. The one binding rule of the importer.
  std::optional<int64_t> boundDim(int index, const std::string &param) const {
    if (!param.empty())
      if (auto it = dims.find(param); it != dims.end())
        return it->second;
    if (index == 0 && microBatch)
      return *microBatch;
    return std::nullopt;
  }

  /// The size a fixed dimension `value` of a graph input takes: the
  /// micro-batch for a leading one when fixedBatch re-binds it, else itself.
  int64_t fixedDim(int index, int64_t value) const {
    return index == 0 && fixedBatch && microBatch && value == *fixedBatch
               ? *microBatch
               : value;
  }
};

/// How the reason (otc.untrained) of a value the exporter folded from a
/// parameter through a lookup begins: such a value is kept constant, and
/// otc-compile warns of each one.
constexpr const char kFoldedLookupReason[] = "a lookup of ";

/// How an initializer relates to another one whose values it repeats.
struct InitializerTie {
  /// The initializer that is a copy.
  std::string copy;
  /// The initializer it repeats, which stays (the one trained).
  std::string source;
  /// Whether `copy` is the transpose of the 2-D `source` (else an equal copy).
  bool transposed = false;
};

/// What findTies compares first: an order-independent summary of a
/// tensor's values (exact: integer sums of hashes of the bit patterns), the
/// same for a copy and a transpose, and whether it has few distinct values.
struct TieKey {
  size_t count = 0;
  uint64_t sum = 0, mixed = 0;
  bool fewDistinct = false;
  bool operator<(const TieKey &o) const {
    return std::tie(count, sum, mixed) < std::tie(o.count, o.sum, o.mixed);
  }
};
TieKey tieKey(const std::vector<float> &values);

namespace detail {
/// The distinct values a tensor's first elements hold, counted until
/// they are many: fewer than half its `count` elements and fewer than 256
/// distinct (ones, zeros, an identity) are few (fewDistinct).
class DistinctValues {
public:
  explicit DistinctValues(size_t count);
  /// Counts `f`; returns whether the values are many (then no more are
  /// counted).
  bool add(float f);
  bool few() const { return !many && seen.size() < limit; }

private:
  static constexpr size_t kFewValues = 256;
  size_t limit;
  bool many = false;
  std::unordered_set<uint32_t> seen; ///< bit patterns
};
} // namespace detail

/// A tensor's TieKey from its values a chunk at a time: the same key as
/// tieKey of the whole.
class TieKeyBuilder {
public:
  explicit TieKeyBuilder(size_t count);
  void add(const float *values, size_t n);
  TieKey key() const;

private:
  TieKey k;
  detail::DistinctValues distinct;
};
/// The diagonal elements a 2-D tensor's sampled key reads (its first ones).
constexpr int64_t kTieKeyDiagonal = 64;
/// A 2-D tensor's key from the first kTieKeyDiagonal elements of its
/// diagonal (`diagonal`, (i, i) in order), which a copy and a transpose
/// share, without reading the rest: what an import that keeps no values
/// keys a large matrix by when the exporter's signature does not say what
/// it is (findTies compares the whole tensors of a shared key).
/// `fewDistinct` is the whole tensor's.
TieKey diagonalTieKey(size_t count, const std::vector<float> &diagonal,
                      bool fewDistinct);

/// A float initializer's values with its name and shape, for findTies: the
/// values themselves, or (an import that keeps no values) their key and a
/// way to read them again should another tensor share the key.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const std::vector<float> *values = nullptr;
  std::optional<TieKey> key;
  std::function<std::vector<float>()> load;
};

/// The ties among `tensors`: an initializer whose values are exactly another's
/// (same shape, at least 2-D) or its transpose (2-D), as exporters write a
/// tied embedding and LM head (W, and a constant-folded copy of W^T).
/// Tensors with few distinct values (ones, zeros, an identity: a fresh
/// LayerNorm's weights) never tie. The source kept is the one with an
/// exporter-given name (no "::"), else the earlier one.
std::vector<InitializerTie> findTies(const std::vector<NamedTensor> &tensors);

/// The transpose of the row-major `rows` x `cols` matrix `src` (Ties.cpp):
/// what a transposed tie's copy holds.
std::vector<float> transposed2d(const float *src, int64_t rows, int64_t cols);

/// A float initializer's name, shape and values (converted to float32).
struct InitializerData {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  /// Set, with `values` empty, for a parameter whose values the import did
  /// not keep (ImportOptions::deferValues): reads them from the model's
  /// external data again into its argument; false with one line in its
  /// second (the file and what is wrong) when it cannot.
  std::function<bool(std::vector<float> &, std::string &)> load;
};

/// Imports the model at `path`. On failure returns null and sets `error` to
/// one line naming the file (and offset) or the ONNX node and what is wrong.
/// When `initializers` is not null it receives the values of the float
/// initializers that became `otc.param` arguments, in argument order.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(mlir::MLIRContext &context, llvm::StringRef path,
                const ImportOptions &options, std::string &error,
                std::vector<InitializerData> *initializers = nullptr);

/// A model file read and parsed once, its header checked and, at opset 13
/// or later, its merged parameters split: importOnnxModel builds a module
/// from it as often as asked (one per micro-batch for --fit) without reading
/// or parsing the file again. An older model is upgraded per import (the
/// upgrade binds the symbolic dimensions). The ONNX checker, which reads the
/// file itself, runs at the first import only.
class LoadedOnnxModel {
public:
  ~LoadedOnnxModel();
  const std::string &path() const { return file; }

private:
  LoadedOnnxModel() = default;
  friend std::unique_ptr<LoadedOnnxModel> loadOnnxModel(llvm::StringRef,
                                                        std::string &);
  friend mlir::OwningOpRef<mlir::ModuleOp>
  importOnnxModel(mlir::MLIRContext &, const LoadedOnnxModel &,
                  const ImportOptions &, std::string &,
                  std::vector<InitializerData> *);
  std::string file;
  std::unique_ptr<onnx::ModelProto> model;
  int64_t fileOpset = 0;
  /// splitMergedParams's result, at opset 13 or later.
  std::vector<std::pair<std::string, std::string>> splitParams;
  /// Whether an import already ran the ONNX checker.
  mutable bool checked = false;
  /// What the first import without values learned of the large float
  /// initializers (frontend/Importer.h's InitializerCache).
  std::shared_ptr<void> initializerCache;
};

/// Reads `path` for importOnnxModel; null with `error` set (as an import's)
/// when it cannot.
std::unique_ptr<LoadedOnnxModel> loadOnnxModel(llvm::StringRef path,
                                               std::string &error);

/// Imports a loaded model, as importOnnxModel(path) does the file.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(mlir::MLIRContext &context, const LoadedOnnxModel &model,
                const ImportOptions &options, std::string &error,
                std::vector<InitializerData> *initializers = nullptr);

} // namespace otc

#endif // OTC_FRONTEND_ONNXIMPORTER_H
