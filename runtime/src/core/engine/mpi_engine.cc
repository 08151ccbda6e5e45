#include "core/engine/mpi_engine.h"

#include <chrono>
#include <thread>

#include "api/algorithms/names.h"
#include "core/algorithms/algorithm.h"
#include "core/algorithms/hierarchical_allgather.h"
#include "core/backends/mpi/mpi_backend.h"
#include "core/backends/mpi/mpi_context.h"
#include "core/backends/mpi/peer_probe.h"
#include "core/backends/nccl/nccl_backend.h"

namespace hvdtune::internal {
namespace {

// Waits for a nonblocking collective of the negotiation. Other ranks may be
// far behind (computing, or sleeping out their cycle time), and with more
// ranks than cores a spinning wait takes the core a late rank needs. So:
// test in a tight loop only briefly (long enough for ranks that arrive
// together), then sleep between tests, longer and longer. With tensors of
// this rank waiting the sleeps stay short, so the round completes soon
// after the last rank arrives; when idle they grow to a fifth of a
// millisecond. `keep_waiting(seconds waited)` is asked between sleeps;
// false abandons the request (returns MPI_ERR_PENDING with the request
// still posted).
int WaitSleeping(MPI_Request* req, bool busy,
                 const ControlTransport::KeepWaiting& keep_waiting) {
  using Clock = std::chrono::steady_clock;
  int done = 0;
  const auto begin = Clock::now();
  const auto spin_until = begin + std::chrono::microseconds(busy ? 300 : 5);
  const auto max_pause = std::chrono::microseconds(busy ? 50 : 200);
  auto pause = std::chrono::microseconds(busy ? 5 : 10);
  for (;;) {
    const int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    const auto now = Clock::now();
    if (now < spin_until) {
      // Polling, but giving the core to any other runnable thread (a late
      // rank's, with more ranks than cores) between tests.
      if (busy) std::this_thread::yield();
      continue;
    }
    if (pause == max_pause &&
        !keep_waiting(std::chrono::duration<double>(now - begin).count())) {
      return MPI_ERR_PENDING;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, max_pause);
  }
}

class MpiControl final : public ControlTransport {
 public:
  explicit MpiControl(const MpiContext& mpi) : mpi_(mpi) {}

  Status AllreduceAnd(std::uint64_t* words, std::size_t n, bool busy,
                      const KeepWaiting& keep_waiting) override {
    MPI_Request req;
    return Await(MPI_Iallreduce(MPI_IN_PLACE, words, static_cast<int>(n),
                                MPI_UINT64_T, MPI_BAND, mpi_.control, &req),
                 &req, busy, keep_waiting, "MPI_Allreduce (negotiation)");
  }
  Status Broadcast(void* data, std::int64_t bytes, bool busy,
                   const KeepWaiting& keep_waiting) override {
    MPI_Request req;
    return Await(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, 0,
                            mpi_.control, &req),
                 &req, busy, keep_waiting, "MPI_Bcast (negotiation)");
  }
  Status GatherInt(const int* mine, int* all, bool busy,
                   const KeepWaiting& keep_waiting) override {
    MPI_Request req;
    return Await(
        MPI_Igather(mine, 1, MPI_INT, all, 1, MPI_INT, 0, mpi_.control, &req),
        &req, busy, keep_waiting, "MPI_Gather (negotiation)");
  }
  Status Gatherv(const void* mine, int bytes, void* all, const int* lens,
                 const int* displs, bool busy,
                 const KeepWaiting& keep_waiting) override {
    MPI_Request req;
    return Await(MPI_Igatherv(mine, bytes, MPI_BYTE, all, lens, displs,
                              MPI_BYTE, 0, mpi_.control, &req),
                 &req, busy, keep_waiting, "MPI_Gatherv (negotiation)");
  }
  std::vector<std::vector<std::uint8_t>> AllgatherBytes(
      const std::vector<std::uint8_t>& mine) override {
    return internal::AllgatherBytes(mpi_.control, mine);
  }

 private:
  static Status Await(int rc, MPI_Request* req, bool busy,
                      const KeepWaiting& keep_waiting, const char* what) {
    if (rc == MPI_SUCCESS) rc = WaitSleeping(req, busy, keep_waiting);
    // Given up: the collective stays posted (the caller keeps its buffers).
    if (rc == MPI_ERR_PENDING) return Status::Stalled("");
    if (rc != MPI_SUCCESS) return MpiError(what, rc);
    return Status::Ok();
  }

  const MpiContext& mpi_;
};

// One of the runtime's MPI algorithms (core/algorithms/), bound to the
// engine's communicators.
class MpiAllreduce final : public EngineAllreduce {
 public:
  MpiAllreduce(std::unique_ptr<AllreduceAlgorithm> algorithm,
               const MpiContext& mpi, const MpiTypes& types, Backend& host,
               Backend* device)
      : algorithm_(std::move(algorithm)),
        mpi_(mpi),
        types_(types),
        host_(host),
        device_(device) {}
  std::string_view name() const override { return algorithm_->name(); }
  Status Run(const KnobSettings& knobs, const void* in, void* out,
             std::int64_t count, DataType dtype, ReduceOp op) override {
    return algorithm_->Run(Context(knobs), in, out, count, dtype, op);
  }
  bool has_device_version() const override {
    return algorithm_->has_device_version();
  }
  Status RunDevice(const KnobSettings& knobs, const void* in, void* out,
                   std::int64_t count, DataType dtype, ReduceOp op) override {
    return algorithm_->RunDevice(Context(knobs), in, out, count, dtype, op);
  }

 private:
  AlgorithmContext Context(const KnobSettings& knobs) const {
    return {host_, mpi_, types_, knobs, device_};
  }
  std::unique_ptr<AllreduceAlgorithm> algorithm_;
  const MpiContext& mpi_;
  const MpiTypes& types_;
  Backend& host_;
  Backend* device_;
};

class MpiRankProbe final : public RankProbe {
 public:
  MpiRankProbe(MPI_Comm comm, MPI_Comm local) : probe_(comm, local) {}
  void Answer() override { probe_.Answer(); }
  std::vector<int> Unanswered(double seconds) override {
    return probe_.Unanswered(seconds);
  }
  std::string Describe(const std::vector<int>& ranks) const override {
    return probe_.Describe(ranks);
  }

 private:
  PeerProbe probe_;
};

class MpiEngine final : public Engine {
 public:
  explicit MpiEngine(const std::vector<int>& ranks)
      : mpi_(MpiContext::Create(ranks)), control_(mpi_) {
    Refresh();
  }
  ~MpiEngine() override {
    backend_.reset();
    types_.reset();
    mpi_.Free();
  }

  std::string_view name() const override { return "mpi"; }
  std::string_view label() const override { return "MPI"; }
  EngineKind kind() const override { return EngineKind::kMpi; }
  std::string library_version() const override { return MpiLibraryVersion(); }
  const World& world() const override { return world_; }
  void SplitNodes(int ranks_per_node) override {
    mpi_.SplitNodes(ranks_per_node);
    Refresh();
    types_ = std::make_unique<MpiTypes>();
    backend_ = std::make_unique<MpiBackend>(mpi_.data, *types_);
  }
  ControlTransport& control() override { return control_; }
  Backend& host() override { return *backend_; }
  std::unique_ptr<Backend> MakeDeviceBackend(Status* why) override {
    return MakeNcclBackend(mpi_, why);
  }
  std::vector<std::unique_ptr<EngineAllreduce>> MakeAllreduceAlgorithms(
      Backend* device) override {
    std::vector<std::unique_ptr<EngineAllreduce>> all(
        std::size(kAllreduceAlgorithmNames));
    for (auto& a : internal::MakeAllreduceAlgorithms()) {
      for (std::size_t i = 0; i < all.size(); ++i) {
        if (kAllreduceAlgorithmNames[i] == a->name()) {
          all[i] = std::make_unique<MpiAllreduce>(std::move(a), mpi_, *types_,
                                                  *backend_, device);
          break;
        }
      }
    }
    return all;
  }
  Status HierarchicalAllgather(
      const KnobSettings& knobs, const void* in, std::int64_t bytes, void* out,
      const std::vector<std::int64_t>& bytes_per_rank) override {
    return hierarchical_allgather_.Run({*backend_, mpi_, *types_, knobs}, in,
                                       bytes, out, bytes_per_rank);
  }
  int RanksOnThisMachine() override {
    return internal::RanksOnThisMachine(mpi_.data);
  }
  std::unique_ptr<RankProbe> MakeRankProbe() override {
    // The watchdog's thread calls MPI while the cycle thread waits inside
    // it.
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided != MPI_THREAD_MULTIPLE) return nullptr;
    return std::make_unique<MpiRankProbe>(mpi_.data, mpi_.local);
  }
  bool transfers_time_out() const override { return false; }
  void EndStuckJob() override { MPI_Abort(MPI_COMM_WORLD, 1); }

 private:
  void Refresh() {
    world_ = {mpi_.rank,       mpi_.size,       mpi_.local_rank,
              mpi_.local_size, mpi_.cross_rank, mpi_.cross_size};
  }

  MpiContext mpi_;
  MpiControl control_;
  World world_;
  std::unique_ptr<MpiTypes> types_;
  std::unique_ptr<MpiBackend> backend_;
  internal::HierarchicalAllgather hierarchical_allgather_;
};

}  // namespace

std::unique_ptr<Engine> MakeMpiEngine(const std::vector<int>& ranks) {
  return std::make_unique<MpiEngine>(ranks);
}

}  // namespace hvdtune::internal
