// Tested by app_test (RunTraining.AnInterruptMidEpochSavesAndTheResumeIsBitIdentical: the flag) and
// cli_test (Cli.SigintSavesAndPrintsTheResumeCommand: a real SIGINT, exit 130).
#include "glassbox/base/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace glassbox {
namespace {

std::atomic<int> g_signal{0};
int g_depth = 0;
struct sigaction g_old_int, g_old_term;

void on_signal(int signo) {
  if (g_signal.load() != 0) {
    // Second signal: abort at once (only async-signal-safe calls here).
    const char msg[] = "\ninterrupted again: stopping now, without saving\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(130);
  }
  g_signal.store(signo);
  const char msg[] = "\ninterrupt: finishing the current step, then saving (press Ctrl-C again to abort)\n";
  ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)ignored;
}

}  // namespace

InterruptScope::InterruptScope() {
  if (g_depth++ > 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptScope::~InterruptScope() {
  if (--g_depth > 0) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool interrupt_requested() { return g_signal.load(std::memory_order_relaxed) != 0; }
int interrupt_signal() { return g_signal.load(); }
void request_interrupt(int signal_number) { g_signal.store(signal_number); }
void clear_interrupt() { g_signal.store(0); }

}  // namespace glassbox
