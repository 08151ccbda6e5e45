// How the cycle thread asks the kernel to schedule it.
//
// The cycle thread does little work but sits on every collective's critical
// path: each negotiation round and each step of a ring waits until the
// thread runs again. Where ranks share cores with the training threads
// (more ranks than cores, or an application's own thread pool on every
// core), a woken cycle thread otherwise waits out the running thread's
// time slice (a few milliseconds) before it may run: measured on 2 nodes x
// 2 ranks on 2 cores, a negotiation round took 8-15 ms that way against
// 0.1 ms on idle cores. Linux 6.12 and later let a SCHED_OTHER thread ask
// for a shorter slice (sched_setattr's sched_runtime), and a woken thread
// with a shorter slice than the running one preempts it.
#pragma once

#include <cstdint>
#include <string>

#include "hvdtune/config.h"

namespace hvdtune::internal {

/// Makes the calling thread the cycle thread: names it hvdtune-cycle, makes
/// its sleeps exact to the microsecond, and applies the settings' time
/// slice. A request the system refuses is skipped, with one line on stderr
/// saying why when `warn` (rank 0).
void PrepareCycleThread(const RuntimeSettings& settings, bool warn);

/// The cycle thread's priority boost (the cycle_thread_boost knob): nice
/// levels below the value the thread had when this was made. Made and
/// applied on the thread it boosts.
class PriorityBoost {
 public:
  /// Remembers the calling thread's nice value.
  PriorityBoost();
  /// Sets the thread's nice value to its first one minus `levels` (at
  /// least -20), unless that is already in force. On a refusal the thread
  /// keeps its nice value and, once per object when `warn`, says why on
  /// stderr; the job goes on.
  void Apply(int levels, bool warn);
  /// The levels last applied successfully.
  int applied() const { return applied_; }

 private:
  int base_;
  int applied_ = 0;
  bool warned_ = false;
};

/// Names the calling thread (shown by top -H, ps -L and debuggers; at most
/// 15 characters are kept).
void NameThisThread(const char* name);

/// Asks for a scheduler time slice of `microseconds` (100 - 100,000: the
/// kernel's range) for the calling thread, keeping its policy and nice
/// value. Leaves real-time and deadline threads alone. Returns an empty
/// string on success, else why not (the system call's error). A kernel
/// before 6.12 accepts the request and keeps its own slice.
std::string RequestSchedulerSlice(std::int64_t microseconds);

/// Sets the calling thread's nice value (-20 - 19; other threads of the
/// process keep theirs). Returns an empty string on success, else why not
/// (lowering it needs CAP_SYS_NICE or a high enough RLIMIT_NICE).
std::string SetThreadNice(int nice);

/// The calling thread's nice value (0 where the system has none).
int ThreadNice();

/// Whether the calling thread may lower its nice value by `levels` (it
/// tries, then puts the value back). False when it is already at -20.
bool CanRaiseThreadPriority(int levels);

/// The time slice the kernel reports for the calling thread (`tid` 0) or
/// thread `tid`, in microseconds; -1 where it reports none.
std::int64_t SchedulerSliceMicroseconds(int tid = 0);

}  // namespace hvdtune::internal
