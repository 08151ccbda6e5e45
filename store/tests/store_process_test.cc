// The store under real processes and real faults: 8 writers on one file,
// a writer killed with SIGKILL mid-write, a file locked by another process,
// a corrupt file, a read-only location, a newer schema, the writer queue.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <set>
#include <thread>

#include "hvdtune/store/store.h"
#include "hvdtune/store/writer.h"
#include "store_test_util.h"

namespace hvdtune::store {
namespace {

using testing::MakeSample;
using testing::ReadAll;
using testing::ScratchDir;
using testing::TestHardware;

// Runs `body` in a child process; returns its pid. The child never returns
// into the test framework.
template <class F>
pid_t Spawn(F&& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    _exit(rc);
  }
  return pid;
}

int ExitCode(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(StoreProcessTest, EightProcessesWriteOneFileWithoutLoss) {
  ScratchDir dir;
  const std::string path = dir.File("store.db");
  { Store s({path}); }  // created and migrated once; the children race on rows
  constexpr int kProcs = 8, kSamples = 40;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pids.push_back(Spawn([&, p] {
      Store s({path, 10000});
      const auto hw = s.PutFingerprint("hardware", TestHardware(p % 3 + 1));
      const auto model =
          s.PutFingerprint("model", ModelFingerprint({{"float32", 100}}));
      const auto run = s.BeginRun(hw, model, "0.1.0", "fresh", p);
      for (int i = 1; i <= kSamples; ++i) {
        s.AddSamples(run, {MakeSample(i, p * 1000.0 + i)});  // one commit each
      }
      s.EndRun(run, "completed", 1);
      return 0;
    }));
  }
  for (pid_t pid : pids) EXPECT_EQ(ExitCode(pid), 0);
  Store s({path});
  EXPECT_EQ(s.IntegrityCheck(), "ok");
  int total = 0;
  for (std::int64_t run = 1; run <= kProcs; ++run) {
    const auto info = s.GetRun(run);
    ASSERT_TRUE(info) << "run " << run;
    EXPECT_EQ(info->status, "completed");
    const auto samples = s.RunSamples(run);
    EXPECT_EQ(samples.size(), static_cast<std::size_t>(kSamples));
    for (const Sample& x : samples) EXPECT_EQ(x.values.size(), 3u);
    total += static_cast<int>(samples.size());
  }
  EXPECT_EQ(total, kProcs * kSamples);
  // Three distinct hardware fingerprints, each stored once.
  int fingerprints = 0;
  sqlite3_exec(
      s.db(), "SELECT COUNT(*) FROM fingerprints WHERE kind = 'hardware'",
      [](void* n, int, char** v, char**) {
        *static_cast<int*>(n) = std::atoi(v[0]);
        return 0;
      },
      &fingerprints, nullptr);
  EXPECT_EQ(fingerprints, 3);
}

TEST(StoreProcessTest, SigkillWhileWritingLosesNoCommittedRow) {
  ScratchDir dir;
  const std::string path = dir.File("store.db");
  std::int64_t hw = 0, model = 0;
  {
    Store s({path});
    hw = s.PutFingerprint("hardware", TestHardware());
    model = s.PutFingerprint("model", ModelFingerprint({{"float32", 1}}));
  }
  std::mt19937 rng(7);
  std::set<int> committed;  // sample indices reported after their commit
  int next = 1;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(4);
  int kills = 0;
  while (std::chrono::steady_clock::now() < deadline && kills < 12) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const int first = next;
    const pid_t pid = Spawn([&, first] {
      close(fds[0]);
      Store s({path, 10000});
      const auto run = s.BeginRun(hw, model, "0.1.0", "fresh", first);
      for (int i = first;; ++i) {
        // Several rows per transaction, so a kill can land inside one.
        s.AddSamples(run, {MakeSample(i, i), MakeSample(-i, -i)});
        if (write(fds[1], &i, sizeof i) != sizeof i) return 1;
      }
    });
    close(fds[1]);
    const int wait_ms = std::uniform_int_distribution<int>(20, 120)(rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    kill(pid, SIGKILL);
    int i = 0;
    while (read(fds[0], &i, sizeof i) == sizeof i) {
      committed.insert(i);
      next = std::max(next, i + 1);
    }
    close(fds[0]);
    ExitCode(pid);
    ++kills;
    next += 1000;  // indices the killed child may have left half-written
    Store s({path, 10000});
    ASSERT_EQ(s.IntegrityCheck(), "ok") << "after kill " << kills;
  }
  EXPECT_GE(kills, 5);
  Store s({path});
  std::set<int> present;
  for (const Sample& x : s.PairSamples(hw, model, 1 << 30)) {
    EXPECT_EQ(x.values.size(), 3u);  // never a sample without its values
    present.insert(x.index);
  }
  ASSERT_GT(committed.size(), 10u);
  for (int i : committed) {
    EXPECT_TRUE(present.count(i)) << "committed sample " << i << " lost";
    EXPECT_TRUE(present.count(-i)) << "half of a transaction: " << -i;
  }
  // Every transaction is whole: a row is present iff its partner is.
  for (int i : present) EXPECT_TRUE(present.count(-i)) << i;
}

TEST(StoreFaultTest, LockedByAnotherProcessFailsWithinTheTimeout) {
  ScratchDir dir;
  const std::string path = dir.File("store.db");
  { Store s({path}); }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = Spawn([&] {
    close(fds[0]);
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return 1;
    if (sqlite3_exec(db,
                     "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; "
                     "CREATE TABLE held(x);",
                     nullptr, nullptr, nullptr) != SQLITE_OK) {
      return 2;
    }
    char ok = 1;
    if (write(fds[1], &ok, 1) != 1) return 3;
    pause();  // holds the lock until killed
    return 0;
  });
  close(fds[1]);
  char ok = 0;
  ASSERT_EQ(read(fds[0], &ok, 1), 1);
  close(fds[0]);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Store s({path, 300});
    s.BeginRun(1, 1, "x", "fresh", 0);
    ADD_FAILURE() << "no error while another process holds the lock";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("locked"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  kill(pid, SIGKILL);
  ExitCode(pid);
  Store s({path});  // the lock is gone with the process; nothing was lost
  EXPECT_EQ(s.IntegrityCheck(), "ok");
}

TEST(StoreFaultTest, CorruptFileIsReportedAndLeftAsItWas) {
  ScratchDir dir;
  const std::string path = dir.File("store.db");
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 300; ++i) std::fputs("not a database at all ", f);
    std::fclose(f);
  }
  const std::string before = ReadAll(path);
  try {
    Store s({path});
    ADD_FAILURE() << "a corrupt file opened";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("not a database"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ReadAll(path), before);
}

TEST(StoreFaultTest, NewerSchemaIsRefusedAndLeftAsItWas) {
  ScratchDir dir;
  const std::string path = dir.File("store.db");
  {
    Store s({path});
    s.PutFingerprint("hardware", TestHardware());
    ASSERT_EQ(sqlite3_exec(s.db(), "PRAGMA user_version=99", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
  }
  const std::string before = ReadAll(path);
  try {
    Store s({path});
    ADD_FAILURE() << "a newer schema opened";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ReadAll(path), before);
}

TEST(StoreFaultTest, UnwritableLocationIsReported) {
  ScratchDir dir;
  // A read-only directory stops everyone but root; /proc stops root too.
  std::string path;
  if (geteuid() == 0) {
    path = "/proc/hvdtune-store-test/store.db";
  } else {
    std::filesystem::create_directories(dir.path() / "ro");
    std::filesystem::permissions(dir.path() / "ro",
                                 std::filesystem::perms::owner_read |
                                     std::filesystem::perms::owner_exec);
    path = dir.File("ro/store.db");
  }
  try {
    Store s({path});
    ADD_FAILURE() << "wrote into " << path;
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(StoreWriterTest, NeverBlocksDropsAndCountsOnOverflow) {
  ScratchDir dir;
  auto store = std::make_unique<Store>(StoreOptions{dir.File("store.db")});
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::vector<std::string> warnings;
  Writer w(std::move(store), 3,
           [&](const std::string& m) { warnings.push_back(m); });
  ASSERT_TRUE(w.Push([gate](Store&) { gate.wait(); }));  // occupies the thread
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = std::chrono::steady_clock::now();
  int accepted = 0;
  for (int i = 0; i < 10; ++i) {
    accepted +=
        w.Push([](Store& s) { s.PutFingerprint("hardware", TestHardware()); });
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0,
            std::chrono::milliseconds(50));
  EXPECT_EQ(accepted, 3);
  EXPECT_EQ(w.dropped(), 7u);
  EXPECT_TRUE(w.Push([](Store&) { throw StoreError("disk full (test)"); }) ==
              false);  // full: dropped
  release.set_value();
  w.Finish();
  EXPECT_EQ(w.written(), 4u);
  EXPECT_EQ(w.failed(), 0u);
  EXPECT_TRUE(warnings.empty());
}

TEST(StoreWriterTest, AFailedWriteWarnsOnceAndLaterWritesGoOn) {
  ScratchDir dir;
  std::vector<std::string> warnings;
  const std::string path = dir.File("store.db");
  {
    Writer w(std::make_unique<Store>(StoreOptions{path}), 16,
             [&](const std::string& m) { warnings.push_back(m); });
    w.Push([](Store&) {
      throw StoreError("config store x: database or disk is full");
    });
    w.Push([](Store&) { throw StoreError("again"); });
    w.Push([](Store& s) { s.PutFingerprint("hardware", TestHardware()); });
    w.Finish();
    EXPECT_EQ(w.failed(), 2u);
    EXPECT_EQ(w.written(), 1u);
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("disk is full"), std::string::npos);
  Store s({path});
  EXPECT_TRUE(s.FindFingerprint("hardware", TestHardware().Hash()));
}

}  // namespace
}  // namespace hvdtune::store
