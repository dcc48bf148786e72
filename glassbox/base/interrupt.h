// Graceful interrupts for long work (training, evaluation): while an InterruptScope lives,
// SIGINT and SIGTERM only set a flag that the work polls at a safe point (the end of an optimiser
// step), so it can save what resumes it and say how; a second signal ends the process at once
// with status 130.
//
//   glassbox::InterruptScope scope;              // handlers installed, previous ones saved
//   while (work_left()) {
//     do_one_step();
//     if (glassbox::interrupt_requested()) { save(); break; }
//   }                                            // handlers restored when scope ends
//
// Without a scope the flag is never set (interrupt_requested() is false) and signals keep their
// default action. Thread safety: the flag is a lock-free atomic, readable from any thread; create
// scopes on one thread (they nest: the outermost restores the original handlers).
#pragma once

namespace glassbox {

class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// True once SIGINT or SIGTERM arrived while a scope was active.
bool interrupt_requested();
// The signal that set the flag (SIGINT or SIGTERM), 0 when none.
int interrupt_signal();
// Sets the flag as a signal would (tests, or an embedding application's own stop button).
void request_interrupt(int signal_number);
// Clears the flag (a new piece of work starts).
void clear_interrupt();

}  // namespace glassbox
