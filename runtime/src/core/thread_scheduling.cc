#include "core/thread_scheduling.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace hvdtune::internal {
namespace {

#ifdef __linux__
// The kernel's struct sched_attr (include/uapi/linux/sched/types.h), first
// published size; glibc 2.36 has no wrapper.
struct SchedAttr {
  std::uint32_t size;
  std::uint32_t sched_policy;
  std::uint64_t sched_flags;
  std::int32_t sched_nice;
  std::uint32_t sched_priority;
  std::uint64_t sched_runtime;
  std::uint64_t sched_deadline;
  std::uint64_t sched_period;
};

bool GetAttr(int tid, SchedAttr* a) {
  *a = {};
  return syscall(SYS_sched_getattr, tid, a, sizeof *a, 0u) == 0;
}
#endif

// One line when a scheduling request was refused (`why` non-empty).
void WarnNotApplied(bool warn, const char* keeps, const char* var, int value,
                    const std::string& why) {
  if (!warn || why.empty()) return;
  std::cerr << "[hvdtune] the cycle thread keeps " << keeps << " (" << var
            << "=" << value << " not applied: " << why << ")" << std::endl;
}

constexpr int kHighestPriorityNice = -20;

}  // namespace

void PrepareCycleThread(const RuntimeSettings& settings, bool warn) {
#ifdef __linux__
  // Sleeps of this thread (between cycles, inside the negotiation wait) are
  // a few microseconds long; the default 50 us timer slack would stretch
  // each one to the slack.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
  NameThisThread("hvdtune-cycle");
  if (const int us = settings.cycle_thread_slice_us; us > 0) {
    WarnNotApplied(warn, "the kernel's time slice",
                   "HVDTUNE_CYCLE_THREAD_SLICE_US", us,
                   RequestSchedulerSlice(us));
  }
}

void NameThisThread(const char* name) {
#ifdef __linux__
  char buf[16] = {};
  std::strncpy(buf, name, sizeof buf - 1);
  pthread_setname_np(pthread_self(), buf);
#else
  (void)name;
#endif
}

std::string RequestSchedulerSlice(std::int64_t microseconds) {
#ifdef __linux__
  SchedAttr a;
  if (!GetAttr(0, &a)) {
    return std::string("sched_getattr: ") + std::strerror(errno);
  }
  if (a.sched_policy != SCHED_OTHER && a.sched_policy != SCHED_BATCH) {
    return "";  // real-time, deadline or idle: not ours to change
  }
  // Same policy and nice value; the slice is the only change.
  a.size = sizeof a;
  a.sched_flags = 0;
  a.sched_runtime = static_cast<std::uint64_t>(microseconds) * 1000u;
  a.sched_deadline = 0;
  a.sched_period = 0;
  if (syscall(SYS_sched_setattr, 0, &a, 0u) != 0) {
    return std::string("sched_setattr: ") + std::strerror(errno);
  }
  return "";
#else
  (void)microseconds;
  return "not supported on this system";
#endif
}

std::string SetThreadNice(int nice) {
#ifdef __linux__
  // Linux applies PRIO_PROCESS with a thread id to that thread alone.
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice) != 0) {
    return std::string("setpriority: ") + std::strerror(errno);
  }
  return "";
#else
  (void)nice;
  return "not supported on this system";
#endif
}

int ThreadNice() {
#ifdef __linux__
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  return errno == 0 ? nice : 0;
#else
  return 0;
#endif
}

bool CanRaiseThreadPriority(int levels) {
  const int now = ThreadNice();
  const int target = std::max(kHighestPriorityNice, now - levels);
  if (target == now) return false;
  if (!SetThreadNice(target).empty()) return false;
  SetThreadNice(now);  // a higher nice value needs no privilege
  return true;
}

PriorityBoost::PriorityBoost() : base_(ThreadNice()) {}

void PriorityBoost::Apply(int levels, bool warn) {
  if (levels == applied_) return;
  const std::string why =
      SetThreadNice(std::max(kHighestPriorityNice, base_ - levels));
  if (why.empty()) {
    applied_ = levels;
    return;
  }
  WarnNotApplied(warn && !warned_, "its priority", "HVDTUNE_CYCLE_THREAD_BOOST",
                 levels, why);
  warned_ = true;
}

std::int64_t SchedulerSliceMicroseconds(int tid) {
#ifdef __linux__
  SchedAttr a;
  if (!GetAttr(tid, &a) || a.sched_runtime == 0) return -1;
  return static_cast<std::int64_t>(a.sched_runtime / 1000u);
#else
  (void)tid;
  return -1;
#endif
}

}  // namespace hvdtune::internal
