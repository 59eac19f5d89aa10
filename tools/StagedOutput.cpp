//===- StagedOutput.cpp - otc-compile's output folder, replaced whole -----===//
//
// The staging folder of StagedOutput.h. A signal handler removes what was
// staged before the signal takes its course (LLVM's handler, which then
// removes its own temporary files and ends the process): the handler knows
// the staged files from a fixed table, since a signal handler may only
// unlink and rmdir what it is given.
//
//===----------------------------------------------------------------------===//

#include "tools/StagedOutput.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <unistd.h>

using namespace otc;

namespace {

/// What the signal handler removes: the staged files and their folder.
constexpr int kMaxStaged = 16;
constexpr size_t kMaxPath = 4096;
char gStagedFiles[kMaxStaged][kMaxPath];
volatile std::sig_atomic_t gNumStaged = 0;
char gStageDir[kMaxPath];
volatile std::sig_atomic_t gStageLive = 0;

constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction gPrevious[3];

extern "C" void removeStageOnSignal(int signal) {
  if (gStageLive) {
    for (int i = 0; i < gNumStaged; ++i)
      ::unlink(gStagedFiles[i]);
    ::rmdir(gStageDir);
  }
  // The handler this one replaced (LLVM's), or the default action.
  for (int i = 0; i < 3; ++i)
    if (kSignals[i] == signal)
      sigaction(signal, &gPrevious[i], nullptr);
  raise(signal);
}

/// Copies \p text into \p out (kMaxPath bytes); false when it does not fit.
bool copyPath(char *out, llvm::StringRef text) {
  if (text.size() + 1 > kMaxPath)
    return false;
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return true;
}

} // namespace

StagedOutput::StagedOutput(llvm::StringRef finalDir) : final_(finalDir.str()) {
  // DIR without trailing separators, then .tmp-PID: beside DIR.
  llvm::StringRef base = finalDir;
  while (base.size() > 1 && llvm::sys::path::is_separator(base.back()))
    base = base.drop_back();
  stage_ =
      base.str() + ".tmp-" + std::to_string(llvm::sys::Process::getProcessId());
}

StagedOutput::~StagedOutput() {
  if (created_ && !published_ && !kept_)
    remove();
  if (created_) {
    gStageLive = 0;
    for (int i = 0; i < 3; ++i)
      sigaction(kSignals[i], &gPrevious[i], nullptr);
  }
}

std::string StagedOutput::path(llvm::StringRef name, std::string &err) {
  if (!created_) {
    if (std::error_code ec = llvm::sys::fs::create_directories(stage_)) {
      err = "cannot create '" + stage_ + "': " + ec.message();
      return std::string();
    }
    if (!copyPath(gStageDir, stage_)) {
      err = "the path '" + stage_ + "' is too long";
      return std::string();
    }
    gNumStaged = 0;
    gStageLive = 1;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = removeStageOnSignal;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < 3; ++i)
      sigaction(kSignals[i], &action, &gPrevious[i]);
    created_ = true;
  }
  llvm::SmallString<256> file(stage_);
  llvm::sys::path::append(file, name);
  bool known = false;
  for (int i = 0; i < gNumStaged; ++i)
    known |= file.str() == gStagedFiles[i];
  if (!known) {
    if (gNumStaged == kMaxStaged || !copyPath(gStagedFiles[gNumStaged], file)) {
      err = "cannot stage '" + file.str().str() + "'";
      return std::string();
    }
    gNumStaged = gNumStaged + 1;
  }
  return file.str().str();
}

std::string StagedOutput::finalPath(llvm::StringRef name) const {
  llvm::SmallString<256> file(final_);
  llvm::sys::path::append(file, name);
  return file.str().str();
}

bool StagedOutput::publish(std::string &err) {
  namespace fs = llvm::sys::fs;
  if (!created_)
    return true;
  if (!fs::exists(final_)) {
    // A new output folder: the staging folder becomes it.
    if (std::error_code ec = fs::rename(stage_, final_)) {
      err =
          "cannot rename '" + stage_ + "' to '" + final_ + "': " + ec.message();
      return false;
    }
    gStageLive = 0;
    published_ = true;
    return true;
  }
  if (!fs::is_directory(final_)) {
    err = "cannot write into '" + final_ + "': it is not a folder";
    return false;
  }
  llvm::SmallVector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(stage_, ec), end; it != end && !ec;
       it.increment(ec))
    names.push_back(llvm::sys::path::filename(it->path()).str());
  if (ec) {
    err = "cannot list '" + stage_ + "': " + ec.message();
    return false;
  }
  // The program last: a `train` found beside new files is the new one.
  std::stable_partition(names.begin(), names.end(),
                        [](const std::string &n) { return n != "train"; });
  for (const std::string &name : names) {
    llvm::SmallString<256> from(stage_);
    llvm::sys::path::append(from, name);
    if (std::error_code rc = fs::rename(from, finalPath(name))) {
      err = "cannot rename '" + from.str().str() + "' to '" + finalPath(name) +
            "': " + rc.message();
      return false;
    }
  }
  remove();
  published_ = true;
  return true;
}

void StagedOutput::remove() {
  gStageLive = 0;
  llvm::sys::fs::remove_directories(stage_, /*IgnoreErrors=*/true);
}
