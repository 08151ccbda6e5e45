#include "core/engine/gloo/gloo_node_shm.h"

#include <fcntl.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <random>
#include <thread>

#include "core/engine/gloo/gloo_context.h"
#include "core/engine/gloo/gloo_reduce.h"

namespace hvdtune::internal {
namespace {

constexpr std::uint64_t kMagic = 0x68766474756e6531;  // "hvdtune1"
constexpr std::size_t kPage = 4096;
// Busy checks before a waiter sleeps: a piece's partner is usually a few
// microseconds behind on an idle machine; on a loaded one a sleeping waiter
// leaves the core to the rank it waits for.
constexpr int kSpins = 2000;
// A sleeping waiter wakes at least this often to look for a failure.
constexpr auto kSlice = std::chrono::milliseconds(20);

struct RankSlot {
  alignas(128) std::atomic<std::uint64_t> counters[kShmCounters];
  std::int32_t pid;
  std::int32_t world_rank;
  /// The inode of the rank's pid namespace (0: unknown): its process id
  /// means something here only when it matches ours.
  std::uint64_t pid_ns;
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

// The blob the node's first rank broadcasts: the segment's name and nonce
// ("" when it could not make one).
struct Invitation {
  char name[64];
  std::uint64_t nonce;
  std::uint64_t bytes;
};

}  // namespace

struct NodeShm::Header {
  std::uint64_t magic;
  std::uint64_t nonce;
  std::int32_t local_size;
  /// Bumped on every Publish / FlagFailure; the waiters' futex word.
  alignas(128) std::atomic<std::uint32_t> epoch;
  /// How many ranks may be asleep on `epoch` (a Publish wakes only then).
  std::atomic<std::uint32_t> waiters;
  /// World rank + 1 of the first rank that flagged a failure; 0: none.
  std::atomic<std::int32_t> failed;

  RankSlot* slots() {
    return reinterpret_cast<RankSlot*>(reinterpret_cast<std::uint8_t*>(this) +
                                       kSlotsAt);
  }
  static const std::size_t kSlotsAt;
};

const std::size_t NodeShm::Header::kSlotsAt =
    (sizeof(NodeShm::Header) + 127) / 128 * 128;

namespace {

std::uint64_t PidNamespace() {
  char link[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof link - 1);
  if (n <= 0) return 0;
  // "pid:[4026531836]"
  const char* open = std::strchr(link, '[');
  return open == nullptr ? 0 : std::strtoull(open + 1, nullptr, 10);
}

// Whether process `pid` has exited (gone, or a zombie not yet reaped).
bool ProcessGone(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // "pid (comm) S ...": the state follows the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

int Futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t value,
          const timespec* timeout) {
  return static_cast<int>(::syscall(SYS_futex, reinterpret_cast<void*>(word),
                                    op, value, timeout, nullptr, 0));
}

// Every rank's `*flag` ANDed over the world (collective).
Status AgreeOnWorld(const GlooGroups& groups, int* flag) {
  if (groups.world().size == 1) return Status::Ok();
  return groups.Guard("allreduce (shared-memory set-up)", [&] {
    gloo::AllreduceOptions opts(groups.all());
    opts.setOutput(flag, 1);
    opts.setReduceFunction(
        GlooReduceFunction(DataType::kInt32, ReduceOp::kMin));
    gloo::allreduce(opts);
  });
}

std::string SegmentName(std::uint64_t nonce) {
  static std::atomic<int> made{0};
  char name[64];
  std::snprintf(name, sizeof name, "/hvdtune-%d-%d-%016llx",
                static_cast<int>(::getpid()), made++,
                static_cast<unsigned long long>(nonce));
  return name;
}

// Maps the named segment of `bytes` (creating it when `create`); null on
// failure.
void* MapSegment(const std::string& name, std::size_t bytes, bool create) {
  const int fd = ::shm_open(name.c_str(),
                            create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) return nullptr;
  bool ok = true;
  if (create) {
    // Reserve the pages now: a full /dev/shm fails here, not as SIGBUS on
    // first touch in the middle of an allreduce.
    ok = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
         ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0;
  } else {
    struct stat st {};
    ok = ::fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) == bytes;
  }
  void* base =
      ok ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
         : MAP_FAILED;
  ::close(fd);
  if (base == MAP_FAILED) {
    if (create) ::shm_unlink(name.c_str());
    return nullptr;
  }
  return base;
}

// The header and the ranks' slots, in whole pages: the data area follows.
std::size_t HeaderBytes(int local_size) {
  const std::size_t raw =
      NodeShm::Header::kSlotsAt +
      static_cast<std::size_t>(local_size) * sizeof(RankSlot);
  return (raw + kPage - 1) / kPage * kPage;
}

}  // namespace

Status NodeShm::Open(const GlooGroups& groups, std::size_t data_bytes,
                     std::unique_ptr<NodeShm>* shm) {
  shm->reset();
  const World& w = groups.world();
  // Even nodes (one node included), each with a node and, across nodes, a
  // cross group.
  int usable = w.local_size > 1 && w.local_size * groups.nodes() == w.size &&
               groups.local() != nullptr &&
               (groups.nodes() == 1 || groups.cross() != nullptr);
  Status s = AgreeOnWorld(groups, &usable);
  if (!s.ok() || usable == 0) return s;

  const std::size_t bytes = HeaderBytes(w.local_size) + data_bytes;
  Invitation inv{};
  void* base = nullptr;
  std::string created;
  if (w.local_rank == 0) {
    std::random_device rd;
    inv.nonce = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    inv.bytes = bytes;
    const std::string name = SegmentName(inv.nonce);
    base = MapSegment(name, bytes, /*create=*/true);
    if (base != nullptr) {
      created = name;
      std::snprintf(inv.name, sizeof inv.name, "%s", name.c_str());
      auto* h = new (base) Header{};
      h->magic = kMagic;
      h->nonce = inv.nonce;
      h->local_size = w.local_size;
      for (int r = 0; r < w.local_size; ++r) new (&h->slots()[r]) RankSlot{};
    }
  }
  s = groups.Guard("broadcast (shared-memory set-up)", [&] {
    gloo::BroadcastOptions opts(groups.local());
    opts.setOutput(reinterpret_cast<std::uint8_t*>(&inv), sizeof inv);
    opts.setRoot(0);
    gloo::broadcast(opts);
  });
  if (s.ok() && w.local_rank != 0 && inv.name[0] != '\0') {
    base = MapSegment(inv.name, inv.bytes, /*create=*/false);
    if (base != nullptr) {
      const auto* h = static_cast<const Header*>(base);
      if (h->magic != kMagic || h->nonce != inv.nonce ||
          h->local_size != w.local_size) {
        ::munmap(base, inv.bytes);
        base = nullptr;
      }
    }
  }
  if (base != nullptr) {
    RankSlot& mine = static_cast<Header*>(base)->slots()[w.local_rank];
    mine.pid = static_cast<std::int32_t>(::getpid());
    mine.world_rank = w.rank;
    mine.pid_ns = PidNamespace();
  }
  // Every rank of the world has tried to map its node's segment once this
  // returns: the name can go (the memory stays while mapped).
  int mapped = s.ok() && base != nullptr;
  if (s.ok()) s = AgreeOnWorld(groups, &mapped);
  if (!created.empty()) ::shm_unlink(created.c_str());
  if (!s.ok() || mapped == 0) {
    if (base != nullptr) ::munmap(base, bytes);
    return s;
  }
  shm->reset(new NodeShm(groups, base, bytes, w.local_rank, w.local_size));
  return Status::Ok();
}

NodeShm::NodeShm(const GlooGroups& groups, void* base, std::size_t bytes,
                 int local_rank, int local_size)
    : groups_(groups),
      base_(base),
      bytes_(bytes),
      header_(static_cast<Header*>(base)),
      data_(static_cast<std::uint8_t*>(base) + HeaderBytes(local_size)),
      local_rank_(local_rank),
      local_size_(local_size) {}

NodeShm::~NodeShm() { ::munmap(base_, bytes_); }

void NodeShm::Publish(ShmCounter counter, std::uint64_t value) {
  header_->slots()[local_rank_].counters[static_cast<int>(counter)].store(
      value, std::memory_order_release);
  header_->epoch.fetch_add(1);
  if (header_->waiters.load() > 0) {
    Futex(&header_->epoch, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

void NodeShm::FlagFailure() {
  std::int32_t none = 0;
  header_->failed.compare_exchange_strong(none, groups_.world().rank + 1);
  header_->epoch.fetch_add(1);
  Futex(&header_->epoch, FUTEX_WAKE, INT_MAX, nullptr);
}

bool NodeShm::Satisfied(ShmCounter counter, std::uint64_t value,
                        int* laggard) const {
  for (int r = 0; r < local_size_; ++r) {
    if (header_->slots()[r].counters[static_cast<int>(counter)].load(
            std::memory_order_acquire) < value) {
      *laggard = r;
      return false;
    }
  }
  return true;
}

std::string NodeShm::DescribeLocal(int local_rank) const {
  const RankSlot& s = header_->slots()[local_rank];
  return "rank " + std::to_string(s.world_rank) + " (pid " +
         std::to_string(s.pid) + ", local rank " + std::to_string(local_rank) +
         ")";
}

Status NodeShm::WaitAll(ShmCounter counter, std::uint64_t value,
                        const char* what) {
  int laggard = 0;
  for (int i = 0; i < kSpins; ++i) {
    if (Satisfied(counter, value, &laggard)) return Status::Ok();
    if (i % 64 == 63) {
      sched_yield();
    } else {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + groups_.timeout();
  const std::uint64_t my_ns = PidNamespace();
  const std::string prefix = "gloo hierarchical allreduce (shared memory) " +
                             std::string("failed on rank ") +
                             std::to_string(groups_.world().rank) + ": ";
  for (;;) {
    header_->waiters.fetch_add(1);
    const std::uint32_t seen = header_->epoch.load();
    bool done = Satisfied(counter, value, &laggard);
    if (!done && header_->failed.load() == 0) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(kSlice);
      timespec slice{static_cast<time_t>(ns.count() / 1000000000),
                     static_cast<long>(ns.count() % 1000000000)};
      Futex(&header_->epoch, FUTEX_WAIT, seen, &slice);
      done = Satisfied(counter, value, &laggard);
    }
    header_->waiters.fetch_sub(1);
    if (done) return Status::Ok();
    const std::int32_t failed = header_->failed.load();
    if (failed != 0) {
      return Status::Aborted(prefix + "rank " + std::to_string(failed - 1) +
                             " of this node failed while this rank waited "
                             "for " +
                             DescribeLocal(laggard) + " to " + what +
                             groups_.DescribeLost());
    }
    const RankSlot& slot = header_->slots()[laggard];
    if (my_ns != 0 && slot.pid_ns == my_ns && ProcessGone(slot.pid)) {
      return Status::Aborted(prefix + DescribeLocal(laggard) +
                             " of this node is gone (waited for it to " + what +
                             ")" + groups_.DescribeLost());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Aborted(
          prefix + "timed out after " +
          std::to_string(groups_.timeout().count() / 1000.0) +
          " s (HOROVOD_GLOO_TIMEOUT_SECONDS) waiting for " +
          DescribeLocal(laggard) + " to " + what + groups_.DescribeLost());
    }
  }
}

}  // namespace hvdtune::internal
