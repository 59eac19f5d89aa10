//===- StagedOutput.h - otc-compile's output folder -------------*- C++ -*-===//
//
// otc-compile writes its files (the source, plan.json, report.html,
// init.safetensors, train) into a folder beside the output folder DIR,
// DIR.tmp-PID on the same file system, and renames them into DIR only once
// all are written and the build has succeeded: a build that fails, or is
// stopped by SIGINT, SIGTERM or SIGHUP, leaves DIR's previous files as they
// were.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TOOLS_STAGEDOUTPUT_H
#define OTC_TOOLS_STAGEDOUTPUT_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace otc {

/// The staging folder of one output folder. Its destructor removes the
/// staging folder unless it was published or kept.
class StagedOutput {
public:
  explicit StagedOutput(llvm::StringRef finalDir);
  ~StagedOutput();
  StagedOutput(const StagedOutput &) = delete;
  StagedOutput &operator=(const StagedOutput &) = delete;

  /// The path of file \p name in the staging folder, which is created
  /// first (with a handler that removes it on SIGINT, SIGTERM and SIGHUP);
  /// "" with \p err set when it cannot be.
  std::string path(llvm::StringRef name, std::string &err);
  /// The path \p name will have in the output folder.
  std::string finalPath(llvm::StringRef name) const;
  /// The staging folder.
  const std::string &dir() const { return stage_; }

  /// Renames every file of the staging folder into the output folder
  /// (created if missing; `train` last), then removes the staging folder.
  bool publish(std::string &err);
  /// Leaves the staging folder for the user to read (a failed build).
  void keep() { kept_ = true; }

private:
  void remove();

  std::string final_, stage_;
  bool created_ = false, published_ = false, kept_ = false;
};

} // namespace otc

#endif // OTC_TOOLS_STAGEDOUTPUT_H
