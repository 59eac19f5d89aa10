//===- OnnxImporter.h - ONNX ModelProto to the otc dialect -------*- C++ -*-===//
//
// Reads an ONNX model (with external data) and builds a module holding one
// function, `@forward`, in the otc dialect. Graph inputs and float
// initializers become function arguments, graph outputs its results; every
// op's location is the name of the ONNX node it came from. Symbolic
// dimensions are bound at import, so the function is statically shaped.
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
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace otc {

/// How symbolic dimensions are bound.
struct ImportOptions {
  /// `--dim NAME=VALUE`: binds every dimension whose dim_param is NAME.
  std::map<std::string, int64_t> dims;
  /// `--micro-batch N`: binds the leading dimension of every graph input when
  /// it is symbolic (a dim_param not in `dims`, or unknown).
  std::optional<int64_t> microBatch;
};

/// A float initializer's name, shape and values (converted to float32).
struct InitializerData {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

/// Imports the model at `path`. On failure returns null and sets `error` to
/// one line naming the file (and offset) or the ONNX node and what is wrong.
/// When `initializers` is not null it receives the values of the float
/// initializers that became `otc.param` arguments, in argument order.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(mlir::MLIRContext &context, llvm::StringRef path,
                const ImportOptions &options, std::string &error,
                std::vector<InitializerData> *initializers = nullptr);

} // namespace otc

#endif // OTC_FRONTEND_ONNXIMPORTER_H
