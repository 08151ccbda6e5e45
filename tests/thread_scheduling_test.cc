// The cycle thread's name and scheduler slice (thread_scheduling.h).
#include "core/thread_scheduling.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

namespace hvdtune::internal {
namespace {

std::string CommOf(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

TEST(ThreadScheduling, NamesTheThreadCutToFifteenCharacters) {
  std::string name;
  std::thread([&] {
    NameThisThread("hvdtune-a-long-thread-name");
    name = CommOf(gettid());
  }).join();
  EXPECT_EQ(name, "hvdtune-a-long-");
}

TEST(ThreadScheduling, SliceRequestKeepsNiceAndIsReportedBack) {
  std::string why;
  int nice_after = 0;
  std::int64_t slice = -2;
  std::thread([&] {
    // A raised nice value (allowed unprivileged) must survive the request.
    ASSERT_EQ(setpriority(PRIO_PROCESS, gettid(), 7), 0);
    why = RequestSchedulerSlice(300);
    errno = 0;
    nice_after = getpriority(PRIO_PROCESS, gettid());
    slice = SchedulerSliceMicroseconds();
  }).join();
  ASSERT_EQ(why, "") << "sched_setattr refused";
  EXPECT_EQ(nice_after, 7);
  if (slice != 300) {
    GTEST_SKIP() << "this kernel keeps its own slice (custom slices need "
                    "Linux 6.12 or later): it reports "
                 << slice << " us";
  }
  EXPECT_EQ(slice, 300);
}

TEST(ThreadScheduling, NiceAppliesToTheCallingThreadOnly) {
  const auto nice_of = [](pid_t tid) {
    return getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  };
  const int mine = nice_of(gettid());
  const int wanted = std::min(mine + 3, 19);
  std::string why;
  int theirs = 0;
  std::thread([&] {
    why = SetThreadNice(wanted);  // raising needs no privilege
    theirs = nice_of(gettid());
  }).join();
  ASSERT_EQ(why, "");
  EXPECT_EQ(theirs, wanted);
  EXPECT_EQ(nice_of(gettid()), mine);
}

// A boost is relative to the thread's first nice value; a refused one keeps
// the value (checked by raising the floor first: a thread that raised its
// nice value may not lower it again without privilege, unless root).
TEST(ThreadScheduling, BoostIsRelativeToTheThreadsFirstNiceValue) {
  const auto nice_of = [](pid_t tid) {
    return getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  };
  const int mine = nice_of(gettid());
  bool can = false;
  int first = 0, boosted = 0, back = 0, applied = -1;
  std::thread([&] {
    const int start = std::min(mine + 4, 19);
    ASSERT_EQ(SetThreadNice(start), "");  // raising needs no privilege
    first = ThreadNice();
    can = CanRaiseThreadPriority(2);
    EXPECT_EQ(ThreadNice(), first) << "the probe puts the value back";
    PriorityBoost boost;
    boost.Apply(2, /*warn=*/false);
    boosted = ThreadNice();
    applied = boost.applied();
    boost.Apply(0, /*warn=*/false);
    back = ThreadNice();
  }).join();
  EXPECT_EQ(nice_of(gettid()), mine) << "other threads keep theirs";
  EXPECT_EQ(back, first);
  if (!can) {
    EXPECT_EQ(boosted, first) << "a refused boost keeps the value";
    EXPECT_EQ(applied, 0);
    GTEST_SKIP() << "this process may not raise a thread's priority";
  }
  EXPECT_EQ(boosted, first - 2);
  EXPECT_EQ(applied, 2);
}

}  // namespace
}  // namespace hvdtune::internal
