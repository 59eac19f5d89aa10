//===- BuildProgram.cpp - running the target's build of `train` -----------===//
//
// otc-compile's build step: where the runtime's libraries are, and the
// compiler run (the target's command, codegen/Target.h) with a line that
// shows on a terminal that it is alive.
//
//===----------------------------------------------------------------------===//

#include "tools/BuildProgram.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <thread>

using llvm::SmallString;
using llvm::SmallVector;

/// Runs `cmd`, printing it first; returns false with `err` set on failure.
bool otc::runTool(llvm::ArrayRef<std::string> cmd, std::string &err) {
  llvm::errs() << "otc-compile: building:";
  for (const std::string &c : cmd)
    llvm::errs() << " " << c;
  llvm::errs() << "\n";
  SmallVector<llvm::StringRef> args(cmd.begin(), cmd.end());
  std::string msg;
  bool execFailed = false;
  llvm::sys::ProcessInfo pi = llvm::sys::ExecuteNoWait(
      cmd[0], args, std::nullopt, {}, 0, &msg, &execFailed);
  if (execFailed) {
    err = "cannot run " + cmd[0] + ": " + msg;
    return false;
  }
  // Host compilers and nvcc take a while on large models: on a terminal,
  // show that the build is alive and for how long it has run.
  bool tty = llvm::errs().is_displayed();
  std::string tool = llvm::sys::path::filename(cmd[0]).str();
  auto start = std::chrono::steady_clock::now();
  llvm::sys::ProcessInfo done;
  do {
    // A zero wait polls; a positive one would kill the child on timeout.
    done = llvm::sys::Wait(pi, 0u, &msg);
    if (done.Pid == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    if (tty && done.Pid == 0) {
      double secs = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
      llvm::errs() << llvm::format("\rotc-compile: %s running, %.0f s", tool.c_str(),
                                   secs);
    }
  } while (done.Pid == 0);
  if (tty)
    llvm::errs() << "\r\x1b[K";
  if (done.ReturnCode != 0) {
    err = cmd[0] + " failed (exit " + std::to_string(done.ReturnCode) + ")" +
          (msg.empty() ? "" : ": " + msg);
    return false;
  }
  return true;
}

/// Directory of the runtime libraries: next to the tools, else the build's.
std::string otc::runtimeLibDir(const char *argv0) {
  std::string exe = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&otc::runtimeLibDir));
  SmallString<256> dir(llvm::sys::path::parent_path(
      llvm::sys::path::parent_path(exe)));
  llvm::sys::path::append(dir, "lib");
  SmallString<256> probe(dir);
  llvm::sys::path::append(probe, "libotcrt_cpu.a");
  if (llvm::sys::fs::exists(probe))
    return dir.str().str();
  return OTC_RUNTIME_LIB_DIR;
}
