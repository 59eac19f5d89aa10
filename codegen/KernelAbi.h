//===- KernelAbi.h - the kernel library's signatures ------------*- C++ -*-===//
//
// The C signatures of the runtime's kernel library as the one table of
// runtime/include/otcrt/kernels.def states them (the header's declarations
// and the libraries' definitions are checked against it when the runtime is
// built), and the check of an emitted call against them: the count of its
// arguments, and what each passes (an integer literal that the parameter's
// integer type holds, a float literal, a buffer of the element type the
// pointer points to, a null pointer, a struct by address) against the
// parameter it binds to.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_KERNELABI_H
#define OTC_CODEGEN_KERNELABI_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace otc {

/// One parameter of a library function, T resolved to the storage type.
struct KernelParam {
  /// "int64_t", "float", "const float *", "void *", "const OtcrtAttention *".
  std::string type;
  std::string name;
  /// For a pointer: what it points to, without const ("float",
  /// "otcrt_bf16", "int64_t", "void", "OtcrtAttention").
  bool pointer = false;
  std::string pointee;
};

/// One function of the table.
struct KernelSignature {
  /// otcrt_<name>, with _f32 or _bf16 for a function per storage type.
  std::string function;
  std::string result;
  std::vector<KernelParam> params;
};

/// Every function of otcrt/kernels.def, each storage type's separately.
llvm::ArrayRef<KernelSignature> kernelSignatures();

/// The signature of `function`, or null when the table has none.
const KernelSignature *lookupKernelSignature(llvm::StringRef function);

/// What one argument of an emitted call passes.
struct KernelArg {
  enum Kind { Integer, Float, Null, Pointer } kind = Integer;
  /// Integer: its value.
  int64_t value = 0;
  /// Pointer: what it points to, as KernelParam::pointee names it (a
  /// buffer's element type, a struct's type; "void" for the stream).
  std::string pointee;

  static KernelArg integer(int64_t v) { return {Integer, v, ""}; }
  static KernelArg floating() { return {Float, 0, ""}; }
  static KernelArg null() { return {Null, 0, ""}; }
  static KernelArg pointer(std::string pointee) {
    return {Pointer, 0, std::move(pointee)};
  }
};

/// Whether a call of `function` with `args` matches its signature: "" when
/// it does, else what differs (a function the table lacks, the count of
/// arguments, the first argument that does not fit its parameter).
std::string checkKernelCall(llvm::StringRef function,
                            llvm::ArrayRef<KernelArg> args);

} // namespace otc

#endif // OTC_CODEGEN_KERNELABI_H
