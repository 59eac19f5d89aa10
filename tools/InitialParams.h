//===- InitialParams.h - otc-compile's init.safetensors ---------*- C++ -*-===//
//
// The initial parameters of a built program, by ONNX initializer name, as
// FP32: the values the import kept, and those it did not
// (ImportOptions::deferValues) read again from the model's external data,
// one tensor at a time, each dropped once written, with a progress line.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TOOLS_INITIALPARAMS_H
#define OTC_TOOLS_INITIALPARAMS_H

#include "frontend/OnnxImporter.h"

#include <cstddef>
#include <string>
#include <vector>

namespace otc {

/// The metadata entry of init.safetensors that names, one per line, the
/// tensors the program does not train (frozen parameters, rotary tables:
/// its BUFFER slots), which otc-export --weights leaves out of the weights.
constexpr const char kUntrainedKey[] = "otc.untrained";

/// Writes `initializers` to `path` as a safetensors file, emptying their
/// values as it goes; `reread` gets the number read again through their
/// `load`; `untrained` names those the program does not train
/// (kUntrainedKey). False with one line in `error` when a value cannot be
/// read or the file written.
bool writeInitialParams(const std::string &path,
                        std::vector<InitializerData> &initializers,
                        const std::vector<std::string> &untrained,
                        size_t &reread, std::string &error);

} // namespace otc

#endif // OTC_TOOLS_INITIALPARAMS_H
