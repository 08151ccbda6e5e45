#include "core/engine/gloo/gloo_context.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <csignal>
#include <exception>
#include <mutex>
#include <thread>

#include "core/thread_scheduling.h"
#include "hvdtune/rendezvous.h"

namespace hvdtune::internal {
namespace {

// How often this process has made a world of these launched ranks: the
// ranks of a world make their runtimes in the same order, so the count
// names the same store keys on every one of them, and a later runtime never
// reads an earlier one's addresses.
int NextGeneration(const std::string& ranks_key) {
  static std::mutex mu;
  static std::map<std::string, int> made;
  std::lock_guard<std::mutex> lock(mu);
  return made[ranks_key]++;
}

// Gloo writes to its sockets without MSG_NOSIGNAL: a peer that dies
// mid-transfer would kill this process with SIGPIPE instead of failing the
// write. A process that left SIGPIPE at its default gets it ignored (Python
// ignores it already; a handler someone installed is kept).
void IgnoreSigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
}

std::string ThisHost() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// Gloo's TCP device reads every incoming message on a thread of its own (an
// epoll loop), which then wakes the thread waiting for it (the cycle
// thread): each message of a Gloo collective costs two wake-ups. Where ranks
// share cores with other work, a woken thread with the kernel's default
// slice may wait for the running thread's slice to end (up to a scheduler
// tick: 4 ms at HZ=250) before it reads; a woken thread with a shorter slice
// preempts. So the loop thread gets the cycle thread's slice
// (HVDTUNE_CYCLE_THREAD_SLICE_US; docs/benchmarks.md has the measurement).
// The device is made on a thread of its own that asks for the slice and the
// name: the loop thread it starts inherits both (Linux copies them to new
// threads), and the caller keeps its own.
std::shared_ptr<gloo::transport::Device> MakeDevice(
    const gloo::transport::tcp::attr& attr, int slice_us) {
  std::shared_ptr<gloo::transport::Device> device;
  std::exception_ptr failed;
  std::thread maker([&] {
    NameThisThread("hvdtune-gloo");
    // A kernel that refuses keeps its own slice: slower, never wrong.
    if (slice_us > 0) RequestSchedulerSlice(slice_us);
    try {
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (...) {
      failed = std::current_exception();
    }
  });
  maker.join();
  if (failed) std::rethrow_exception(failed);
  return device;
}

}  // namespace

GlooGroups::GlooGroups(const GlooSettings& settings,
                       const std::vector<int>& ranks, int loop_slice_us)
    : settings_(settings),
      timeout_(static_cast<std::int64_t>(settings.timeout_seconds * 1000)) {
  std::string key;
  if (ranks.empty()) {
    for (int r = 0; r < settings.size; ++r) launched_.push_back(r);
    key = "all";
  } else {
    launched_ = ranks;
    for (int r : ranks) key += (key.empty() ? "" : ",") + std::to_string(r);
  }
  world_.rank = -1;
  world_.size = static_cast<int>(launched_.size());
  for (int i = 0; i < world_.size; ++i) {
    if (launched_[static_cast<std::size_t>(i)] == settings.rank) {
      world_.rank = i;
    }
  }
  if (world_.rank < 0) {
    throw ConfigError("HOROVOD_RANK=" + std::to_string(settings.rank) +
                      " is not one of the ranks this runtime spans (" + key +
                      ")");
  }
  prefix_ = settings.store_prefix + "hvdtune/" + key + "/" +
            std::to_string(NextGeneration(settings.store_prefix + key)) + "/";
  IgnoreSigpipe();
  try {
    store_ = std::make_unique<RendezvousClient>(
        settings.rendezvous_addr, settings.rendezvous_port, timeout_);
    gloo::transport::tcp::attr attr;
    if (!settings.iface.empty()) {
      attr.iface = settings.iface;
    } else {
      attr.hostname =
          settings.hostname.empty() ? ThisHost() : settings.hostname;
    }
    device_ = MakeDevice(attr, loop_slice_us);
    all_ = Connect("all", world_.rank, world_.size);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(std::string("the Gloo engine could not connect rank ") +
                      std::to_string(world_.rank) + " of " +
                      std::to_string(world_.size) + ": " + e.what() +
                      " (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, "
                      "HOROVOD_GLOO_IFACE, HOROVOD_GLOO_TIMEOUT_SECONDS)");
  }
}

GlooGroups::~GlooGroups() = default;

std::shared_ptr<gloo::Context> GlooGroups::Connect(const std::string& group,
                                                   int rank, int size) {
  gloo::rendezvous::PrefixStore store(prefix_ + group, *store_);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout_);
  ctx->connectFullMesh(store, device_);
  return ctx;
}

void GlooGroups::SplitNodes(const std::vector<int>& node_of) {
  const auto me = static_cast<std::size_t>(world_.rank);
  std::vector<int> local_rank(node_of.size(), 0);
  std::map<int, int> members;  // node -> ranks so far
  for (std::size_t r = 0; r < node_of.size(); ++r) {
    local_rank[r] = members[node_of[r]]++;
  }
  nodes_ = static_cast<int>(members.size());
  node_ = node_of[me];
  world_.local_rank = local_rank[me];
  world_.local_size = members[node_of[me]];
  world_.cross_rank = 0;
  world_.cross_size = 0;
  cross_world_ranks_.clear();
  for (std::size_t r = 0; r < node_of.size(); ++r) {
    if (local_rank[r] != world_.local_rank) continue;
    if (r == me) world_.cross_rank = world_.cross_size;
    ++world_.cross_size;
    cross_world_ranks_.push_back(static_cast<int>(r));
  }
  try {
    local_ = world_.local_size > 1
                 ? Connect("local" + std::to_string(node_of[me]),
                           world_.local_rank, world_.local_size)
                 : nullptr;
    cross_ = world_.cross_size > 1
                 ? Connect("cross" + std::to_string(world_.local_rank),
                           world_.cross_rank, world_.cross_size)
                 : nullptr;
    cross_mesh_ = cross_ != nullptr
                      ? std::make_unique<SocketMesh>(cross_, timeout_)
                      : nullptr;
  } catch (const std::exception& e) {
    throw ConfigError(
        std::string("the Gloo engine could not connect the node groups: ") +
        e.what() + DescribeLost());
  }
}

void GlooGroups::ShareThroughStore(const std::string& group, bool root,
                                   std::vector<char>* blob) {
  const std::string key =
      prefix_ + "share/" + group + "/" + std::to_string(shares_[group]++);
  if (root) {
    store_->set(key, *blob);
  } else {
    *blob = store_->get(key);
  }
}

Status GlooGroups::Guard(const char* what,
                         const std::function<void()>& call) const {
  std::string why;
  try {
    call();
    return Status::Ok();
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "an unknown exception";
  }
  // Gloo's messages end in a newline or a source location; one line.
  for (char& c : why) {
    if (c == '\n') c = ' ';
  }
  return Status::Aborted("gloo " + std::string(what) + " failed on rank " +
                         std::to_string(world_.rank) + ": " + why +
                         DescribeLost());
}

std::string GlooGroups::DescribeLost() const {
  if (!store_) return {};
  // The launcher marks a rank lost once it has reaped it, which may be a
  // little after the survivors saw its connections close.
  constexpr auto kGrace = std::chrono::seconds(2);
  const auto until = std::chrono::steady_clock::now() + kGrace;
  std::string lost;
  for (;;) {
    for (std::size_t i = 0; i < launched_.size(); ++i) {
      const auto v = store_->TryGet(
          settings_.store_prefix + RendezvousServer::LostRankKey(launched_[i]));
      if (!v) continue;
      lost += (lost.empty() ? "" : ", ") + std::string("rank ") +
              std::to_string(i) + " (" + *v + ")";
    }
    if (!lost.empty() || std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return lost.empty() ? "" : "; lost: " + lost;
}

}  // namespace hvdtune::internal
