//===- Emitter.cpp - the cpu target: OpenMP loops, the host compiler ------===//
//
// Generated kernels are static functions whose loop over the items OpenMP
// shares between threads (when there are enough of them); memory is cleared
// and copied with the C library; library calls get no stream. `train` is
// built by the host C++ compiler ($CXX, else c++) against libotcrt_cpu.a.
//
//===----------------------------------------------------------------------===//

#include "targets/cpu/Cpu.h"
#include "codegen/Target.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"

#include <algorithm>
#include <cstdlib>
#include <string>

using namespace otc;

namespace {

class CpuTarget final : public Target {
public:
  llvm::StringRef name() const override { return "cpu"; }
  llvm::StringRef sourceFile() const override { return "model.cpp"; }

  void emitIncludes(llvm::raw_ostream &) const override {}
  void emitLaunchMacros(llvm::raw_ostream &os) const override {
    os << "/// Generated kernel `k` over `n` work items.\n"
          "#define OTC_LAUNCH(k, n, ...) k(n, __VA_ARGS__)\n"
          "#define OTC_LAUNCH_PACKETS(k, n, w, ...) k(n, __VA_ARGS__)\n"
          "/// Records a gather's bad index in the kernel library's error "
          "record\n/// (the first writer wins, among the loop's threads "
          "too).\n"
          "static inline void otc_index_error(OtcrtKernelError *e, int64_t "
          "at,\n"
          "                                   int64_t value, int64_t bound) "
          "{\n"
          "  int32_t none = 0;\n"
          "  if (e && __atomic_compare_exchange_n(&e->code, &none, "
          "(int32_t)OTCRT_ERROR_INDEX,\n"
          "                                       false, __ATOMIC_ACQ_REL, "
          "__ATOMIC_ACQUIRE)) {\n"
          "    e->index = at;\n    e->value = value;\n    e->bound = bound;\n"
          "  }\n}\n\n";
  }
  llvm::StringRef kernelQualifier() const override { return "static void "; }
  llvm::StringRef tableQualifier() const override { return "static "; }
  /// Threads share a loop of at least kParallelElements elements.
  static constexpr int64_t kParallelElements = 16384;
  std::string loopHead(int64_t itemElements) const override {
    int64_t items = (kParallelElements + itemElements - 1) /
                    std::max<int64_t>(itemElements, 1);
    return "#pragma omp parallel for if (items >= " + std::to_string(items) +
           ")\n  for (int64_t i = 0; i < items; ++i) {\n";
  }
  void emitFunctionPrologue(llvm::raw_ostream &) const override {}
  void emitMemset(llvm::raw_ostream &os, int64_t offset,
                  int64_t bytes) const override {
    os << "  std::memset(arena + " << offset << ", 0, " << bytes << ");\n";
  }
  void emitCopy(llvm::raw_ostream &os, llvm::StringRef to,
                llvm::StringRef from, int64_t bytes) const override {
    os << "  std::memcpy(" << to << ", " << from << ", " << bytes << ");\n";
  }
  llvm::StringRef streamArgument() const override { return "nullptr"; }
  bool packsElementwise() const override { return false; }
  bool copiesRuns() const override { return true; }

  llvm::Expected<std::vector<std::string>>
  buildCommand(const BuildPaths &p) const override {
    std::string cxx = "c++";
    if (const char *env = std::getenv("CXX"))
      cxx = env;
    auto found = llvm::sys::findProgramByName(cxx);
    if (!found)
      return llvm::createStringError("no host C++ compiler: '" + cxx +
                                     "' not found (set CXX)");
    // -O3 vectorizes the kernels' loops of any trip count (their copies'
    // runs, AdamW); no value changes: without errno and traps a square
    // root is one vector instruction, and nothing is reassociated.
    std::vector<std::string> command{*found,           "-O3",
                                     "-fno-math-errno", "-fno-trapping-math",
                                     "-std=c++17",      "-fopenmp"};
    // The runtime library's own host flags (-march=native -ffp-contract=off
    // unless it was built portable: runtime/CMakeLists.txt).
    llvm::SmallVector<llvm::StringRef> flags;
    llvm::StringRef(OTC_CPU_HOST_FLAGS).split(flags, ' ', -1, false);
    for (llvm::StringRef f : flags)
      command.push_back(f.str());
    command.insert(command.end(),
                   {"-I", OTC_RUNTIME_INCLUDE_DIR, p.source,
                    p.runtimeLibDir + "/libotcrt_cpu.a", "-o", p.program});
    return command;
  }
};

} // namespace

const Target &otc::cpu::emitter() {
  static const CpuTarget target;
  return target;
}
