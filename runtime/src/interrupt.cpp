// SIGINT and SIGTERM during training (interrupt.h). The handler does only
// what is safe in a signal handler: it stores the signal, writes a fixed
// line with write(2), and on a second signal calls _exit.
#include "interrupt.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace otcrt {
namespace {

volatile std::sig_atomic_t gStop = 0;
volatile std::sig_atomic_t gAnnounce = 0;

void writeLine(const char *text) {
  ssize_t ignored = ::write(2, text, std::strlen(text));
  (void)ignored;
}

extern "C" void onStopSignal(int signal) {
  const int savedErrno = errno;
  if (gStop != 0) {
    writeLine(signal == SIGINT
                  ? "\notc train: SIGINT again: exiting now (no checkpoint "
                    "of this step)\n"
                  : "\notc train: SIGTERM again: exiting now (no checkpoint "
                    "of this step)\n");
    _exit(128 + signal);
  }
  gStop = signal;
  if (gAnnounce)
    writeLine(signal == SIGINT
                  ? "\notc train: SIGINT: stopping after the step in flight "
                    "(Ctrl-C again to exit at once)\n"
                  : "\notc train: SIGTERM: stopping after the step in "
                    "flight (SIGTERM again to exit at once)\n");
  errno = savedErrno;
}

constexpr int kSignals[2] = {SIGINT, SIGTERM};

} // namespace

InterruptScope::InterruptScope(bool announce) {
  gStop = 0;
  gAnnounce = announce ? 1 : 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  // Reads, writes and waits the handler interrupts go on.
  action.sa_flags = SA_RESTART;
  for (int i = 0; i < 2; ++i) {
    if (sigaction(kSignals[i], nullptr, &previous_[i]) != 0)
      continue;
    if (kSignals[i] == SIGINT && previous_[i].sa_handler == SIG_IGN)
      continue;
    replaced_[i] = sigaction(kSignals[i], &action, nullptr) == 0;
  }
}

InterruptScope::~InterruptScope() {
  for (int i = 0; i < 2; ++i)
    if (replaced_[i])
      sigaction(kSignals[i], &previous_[i], nullptr);
}

int stopSignal() { return gStop; }

const char *signalName(int signal) {
  switch (signal) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  default:
    return "a signal";
  }
}

} // namespace otcrt
