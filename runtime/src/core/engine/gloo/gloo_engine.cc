#include "core/engine/gloo/gloo_engine.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/gather.h>
#include <gloo/types.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>

#include "core/backends/nccl/nccl_backend.h"
#include "core/engine/gloo/gloo_allreduce.h"
#include "core/engine/gloo/gloo_backend.h"
#include "core/engine/gloo/gloo_context.h"
#include "core/engine/gloo/gloo_exchange.h"
#include "core/engine/gloo/gloo_nccl_bootstrap.h"

namespace hvdtune::internal {
namespace {

// The negotiation's messages go rank to rank 0 on their own slot, apart
// from the collectives' tags.
constexpr std::uint32_t kGathervTag = 0x6e67;  // "ng"
constexpr std::uint32_t kAndTag = 0x6e61;      // "na"

class GlooControl final : public ControlTransport {
 public:
  explicit GlooControl(const GlooGroups& groups) : groups_(groups) {}

  // Gloo waits inside the call, up to the context's timeout: the stall
  // warnings of a negotiation are not given on this engine, and a wait
  // ends at HOROVOD_GLOO_TIMEOUT_SECONDS as a failure. The round's bit
  // vectors are a few words: one exchange round (gloo_exchange.h).
  Status AllreduceAnd(std::uint64_t* words, std::size_t n, bool,
                      const KeepWaiting&) override {
    if (Alone() || n == 0) return Status::Ok();
    const auto size = static_cast<std::size_t>(groups_.world().size);
    and_scratch_.resize(n * size);
    return groups_.Guard("negotiation allreduce", [&] {
      ExchangeAll(groups_.all(), words, n * sizeof *words, and_scratch_.data(),
                  kAndTag, groups_.timeout());
      for (std::size_t r = 0; r < size; ++r) {
        for (std::size_t i = 0; i < n; ++i) words[i] &= and_scratch_[r * n + i];
      }
    });
  }

  Status Broadcast(void* data, std::int64_t bytes, bool,
                   const KeepWaiting&) override {
    if (Alone() || bytes <= 0) return Status::Ok();
    return groups_.Guard("negotiation broadcast", [&] {
      gloo::BroadcastOptions opts(groups_.all());
      opts.setOutput(static_cast<std::uint8_t*>(data),
                     static_cast<std::size_t>(bytes));
      opts.setRoot(0);
      gloo::broadcast(opts);
    });
  }

  Status GatherInt(const int* mine, int* all, bool,
                   const KeepWaiting&) override {
    if (Alone()) {
      all[0] = *mine;
      return Status::Ok();
    }
    return groups_.Guard("negotiation gather", [&] {
      gloo::GatherOptions opts(groups_.all());
      opts.setInput(const_cast<int*>(mine), 1);
      if (groups_.world().rank == 0) {
        opts.setOutput(all, static_cast<std::size_t>(groups_.world().size));
      }
      opts.setRoot(0);
      gloo::gather(opts);
    });
  }

  Status Gatherv(const void* mine, int bytes, void* all, const int* lens,
                 const int* displs, bool, const KeepWaiting&) override {
    const World& w = groups_.world();
    if (w.rank == 0 && bytes > 0) {
      std::memcpy(static_cast<std::uint8_t*>(all) + displs[0], mine,
                  static_cast<std::size_t>(bytes));
    }
    if (Alone()) return Status::Ok();
    return groups_.Guard("negotiation gatherv", [&] {
      const auto& ctx = groups_.all();
      const auto slot = gloo::Slot::build(gloo::kGatherSlotPrefix, kGathervTag);
      const auto timeout = groups_.timeout();
      if (w.rank != 0) {
        if (bytes == 0) return;
        auto buf = ctx->createUnboundBuffer(const_cast<void*>(mine),
                                            static_cast<std::size_t>(bytes));
        buf->send(0, slot);
        buf->waitSend(timeout);
        return;
      }
      std::int64_t total = 0;
      for (int r = 0; r < w.size; ++r) total += lens[r];
      if (total == lens[0]) return;
      auto buf = ctx->createUnboundBuffer(all, static_cast<std::size_t>(total));
      int posted = 0;
      for (int r = 1; r < w.size; ++r) {
        if (lens[r] == 0) continue;
        buf->recv(r, slot, static_cast<std::size_t>(displs[r]),
                  static_cast<std::size_t>(lens[r]));
        ++posted;
      }
      for (int i = 0; i < posted; ++i) buf->waitRecv(timeout);
    });
  }

  std::vector<std::vector<std::uint8_t>> AllgatherBytes(
      const std::vector<std::uint8_t>& mine) override {
    const World& w = groups_.world();
    std::vector<std::int64_t> lens(static_cast<std::size_t>(w.size), 0);
    std::vector<std::uint8_t> flat;
    Status s = Status::Ok();
    if (Alone()) {
      return {mine};
    }
    s = groups_.Guard("allgather (set-up)", [&] {
      std::int64_t n = static_cast<std::int64_t>(mine.size());
      gloo::AllgathervOptions sizes(groups_.all());
      sizes.setInput(&n, 1);
      sizes.setOutput(lens.data(), std::vector<std::size_t>(lens.size(), 1));
      gloo::allgatherv(sizes);
      std::vector<std::size_t> counts;
      std::int64_t total = 0;
      for (std::int64_t l : lens) {
        counts.push_back(static_cast<std::size_t>(l));
        total += l;
      }
      flat.resize(static_cast<std::size_t>(total));
      if (total == 0) return;
      std::uint8_t none = 0;
      gloo::AllgathervOptions data(groups_.all());
      data.setInput(
          mine.empty() ? &none : const_cast<std::uint8_t*>(mine.data()),
          mine.size());
      data.setOutput(flat.data(), counts);
      gloo::allgatherv(data);
    });
    if (!s.ok()) throw ConfigError(s.message());
    std::vector<std::vector<std::uint8_t>> out;
    std::size_t at = 0;
    for (std::int64_t l : lens) {
      const auto n = static_cast<std::size_t>(l);
      out.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at),
                       flat.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
    }
    return out;
  }

 private:
  bool Alone() const { return groups_.world().size == 1; }
  const GlooGroups& groups_;
  /// Every rank's words of the last AllreduceAnd.
  std::vector<std::uint64_t> and_scratch_;
};

std::string ReadBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::string ThisHost() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

class GlooEngine final : public Engine {
 public:
  explicit GlooEngine(const RuntimeConfig& config)
      : groups_(config.gloo, config.ranks,
                config.settings.cycle_thread_slice_us),
        control_(groups_),
        host_(groups_, groups_.all()),
        hostname_(config.gloo.hostname.empty() ? ThisHost()
                                               : config.gloo.hostname) {}

  std::string_view name() const override { return "gloo"; }
  std::string_view label() const override { return "Gloo"; }
  EngineKind kind() const override { return EngineKind::kGloo; }
  std::string library_version() const override {
    return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
           std::to_string(GLOO_VERSION_MINOR) + "." +
           std::to_string(GLOO_VERSION_PATCH);
  }
  const World& world() const override { return groups_.world(); }

  void SplitNodes(int ranks_per_node) override {
    // Every rank's host and boot: the nodes (by host name, or consecutive
    // blocks of ranks_per_node) and how many ranks share this machine.
    const std::string me = hostname_ + "\n" + ReadBootId();
    const auto all = control_.AllgatherBytes({me.begin(), me.end()});
    std::vector<int> node_of;
    std::map<std::string, int> node_ids;
    machine_ranks_ = 0;
    for (std::size_t r = 0; r < all.size(); ++r) {
      const std::string s(all[r].begin(), all[r].end());
      const std::string host = s.substr(0, s.find('\n'));
      const std::string boot = s.substr(s.find('\n') + 1);
      if (boot == me.substr(me.find('\n') + 1)) ++machine_ranks_;
      if (ranks_per_node > 0) {
        node_of.push_back(static_cast<int>(r) / ranks_per_node);
      } else {
        node_of.push_back(
            node_ids.emplace(host, static_cast<int>(node_ids.size()))
                .first->second);
      }
    }
    groups_.SplitNodes(node_of);
    local_ = std::make_unique<GlooBackend>(groups_, groups_.local());
    cross_ = std::make_unique<GlooBackend>(groups_, groups_.cross());
  }

  ControlTransport& control() override { return control_; }
  Backend& host() override { return host_; }

  std::unique_ptr<Backend> MakeDeviceBackend(Status* why) override {
    // The NCCL communicators' unique ids travel through the rendezvous
    // store (a build without CUDA says so instead).
    GlooNcclBootstrap boot(groups_);
    return MakeNcclBackend(boot, why);
  }

  std::vector<std::unique_ptr<EngineAllreduce>> MakeAllreduceAlgorithms(
      Backend* device) override {
    return MakeGlooAllreduceAlgorithms(host_, *local_, *cross_, device);
  }

  Status HierarchicalAllgather(
      const KnobSettings&, const void* in, std::int64_t bytes, void* out,
      const std::vector<std::int64_t>& bytes_per_rank) override {
    // Gloo's allgatherv is a ring already; the node-leader variant is the
    // MPI engine's.
    return host_.Allgatherv(in, bytes, out, bytes_per_rank);
  }

  int RanksOnThisMachine() override { return machine_ranks_; }
  bool transfers_time_out() const override { return true; }
  void EndStuckJob() override {}

 private:
  GlooGroups groups_;
  GlooControl control_;
  GlooBackend host_;
  std::unique_ptr<GlooBackend> local_, cross_;
  std::string hostname_;
  int machine_ranks_ = 1;
};

}  // namespace

std::unique_ptr<Engine> MakeGlooEngine(const RuntimeConfig& config) {
  return std::make_unique<GlooEngine>(config);
}

}  // namespace hvdtune::internal
