// Stopping a training run on SIGINT (Ctrl-C) or SIGTERM (driver.cpp): while
// an InterruptScope lives, the first such signal is only recorded, and the
// driver's loop asks stopSignal() after each step, then saves a checkpoint
// and exits 128 + the signal; a second signal ends the process at once
// (_exit, with a line on stderr), whatever it is doing.
#ifndef OTCRT_INTERRUPT_H
#define OTCRT_INTERRUPT_H

#include <csignal>

namespace otcrt {

/// Catches SIGINT and SIGTERM while it lives and restores the handlers it
/// replaced when destroyed. SIGINT is left alone where the process started
/// with it ignored (a job a script starts in the background ignores it, so
/// that Ctrl-C in the terminal is not meant for it). Creating one clears
/// the recorded signal. With \p announce, the first signal says on stderr
/// that the run stops after the step in flight.
class InterruptScope {
public:
  explicit InterruptScope(bool announce);
  ~InterruptScope();
  InterruptScope(const InterruptScope &) = delete;
  InterruptScope &operator=(const InterruptScope &) = delete;

private:
  struct sigaction previous_[2];
  bool replaced_[2] = {false, false};
};

/// The signal that asked the run to stop (SIGINT or SIGTERM), 0 if none.
int stopSignal();

/// "SIGINT", "SIGTERM", else "a signal".
const char *signalName(int signal);

} // namespace otcrt

#endif // OTCRT_INTERRUPT_H
