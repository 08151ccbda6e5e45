// An engine is the controller's transport and the collectives' transport
// together (MPI, Gloo): the core asks it for the world (rank, size, local and
// cross groups), for the negotiation's collectives and for the host
// collectives and algorithms, and never names the library behind it.
// Engines are made in one place (MakeEngine, make_engine.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/backends/backend.h"
#include "hvdtune/config.h"
#include "hvdtune/knobs.h"
#include "hvdtune/status.h"

namespace hvdtune::internal {

/// Where this process sits in the runtime's world: its rank among all, on
/// its node (local) and among the ranks with its local rank (cross).
struct World {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int cross_rank = 0, cross_size = 1;
};

/// The negotiation's collectives over the whole world, rooted at rank 0.
/// Each waits for the other ranks; `keep_waiting(seconds waited)` is asked
/// between polls by engines that poll (MPI) and, when it says false, the
/// operation is given up and returns kStalled with an empty message (its
/// buffers must then outlive the engine). Engines that cannot poll wait up
/// to their own timeout and return an error naming what was lost.
class ControlTransport {
 public:
  using KeepWaiting = std::function<bool(double)>;
  virtual ~ControlTransport() = default;
  /// words[i] = bitwise AND of every rank's words[i].
  virtual Status AllreduceAnd(std::uint64_t* words, std::size_t n, bool busy,
                              const KeepWaiting& keep_waiting) = 0;
  /// Rank 0's `bytes` bytes at `data` to every rank (every rank passes the
  /// same `bytes`).
  virtual Status Broadcast(void* data, std::int64_t bytes, bool busy,
                           const KeepWaiting& keep_waiting) = 0;
  /// Every rank's `mine` into all[r] at rank 0 (`all` has size entries
  /// there; unused elsewhere).
  virtual Status GatherInt(const int* mine, int* all, bool busy,
                           const KeepWaiting& keep_waiting) = 0;
  /// Every rank's `bytes` bytes into `all` at rank 0: rank r's at
  /// displs[r], lens[r] long (lens, displs and all are used at rank 0 only).
  virtual Status Gatherv(const void* mine, int bytes, void* all,
                         const int* lens, const int* displs, bool busy,
                         const KeepWaiting& keep_waiting) = 0;
  /// Set-up time: every rank's bytes in rank order. Throws ConfigError.
  virtual std::vector<std::vector<std::uint8_t>> AllgatherBytes(
      const std::vector<std::uint8_t>& mine) = 0;
};

/// One allreduce algorithm of an engine, bound to its groups.
class EngineAllreduce {
 public:
  virtual ~EngineAllreduce() = default;
  virtual std::string_view name() const = 0;
  /// out = reduce over ranks of in, `count` elements; in may equal out.
  /// op is kSum, kMin, kMax or kProduct (the runtime divides for kAverage).
  virtual Status Run(const KnobSettings& knobs, const void* in, void* out,
                     std::int64_t count, DataType dtype, ReduceOp op) = 0;
  /// Whether RunDevice() exists (see AllreduceAlgorithm).
  virtual bool has_device_version() const { return false; }
  virtual Status RunDevice(const KnobSettings& knobs, const void* in, void* out,
                           std::int64_t count, DataType dtype, ReduceOp op) {
    (void)knobs, (void)in, (void)out, (void)count, (void)dtype, (void)op;
    return Status::Internal("allreduce algorithm '" + std::string(name()) +
                            "' has no device version");
  }
};

/// Answers whether the other ranks are still there while a collective is
/// stuck (the data-phase watchdog's question); engines without one name
/// lost ranks in their errors instead.
class RankProbe {
 public:
  virtual ~RankProbe() = default;
  /// Answers the other ranks' questions (the watchdog's thread).
  virtual void Answer() = 0;
  /// Asks every other rank; the ranks that did not answer within
  /// `seconds`, ascending.
  virtual std::vector<int> Unanswered(double seconds) = 0;
  /// "ranks 2, 3 (node 1)".
  virtual std::string Describe(const std::vector<int>& ranks) const = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  /// "mpi" or "gloo" (the collective events' backend name).
  virtual std::string_view name() const = 0;
  /// "MPI" or "Gloo", as messages name it.
  virtual std::string_view label() const = 0;
  virtual EngineKind kind() const = 0;
  /// The library and its version, for the run's record.
  virtual std::string library_version() const = 0;
  virtual const World& world() const = 0;
  /// Second step of construction, once the ranks agreed on the
  /// configuration: the local and cross groups (ranks_per_node > 0 groups
  /// consecutive ranks into emulated nodes). Throws ConfigError.
  virtual void SplitNodes(int ranks_per_node) = 0;
  virtual ControlTransport& control() = 0;
  /// The collectives on host memory over the whole world.
  virtual Backend& host() = 0;
  /// The device backend (NCCL), made collectively; null with the reason in
  /// *why when there is none.
  virtual std::unique_ptr<Backend> MakeDeviceBackend(Status* why) = 0;
  /// The allreduce algorithms indexed by the allreduce_algorithm knob's
  /// value; null where this engine does not serve that choice.
  virtual std::vector<std::unique_ptr<EngineAllreduce>> MakeAllreduceAlgorithms(
      Backend* device) = 0;
  /// HOROVOD_HIERARCHICAL_ALLGATHER: Backend::Allgatherv's contract, through
  /// the node leaders.
  virtual Status HierarchicalAllgather(
      const KnobSettings& knobs, const void* in, std::int64_t bytes, void* out,
      const std::vector<std::int64_t>& bytes_per_rank) = 0;
  /// How many ranks of the world run on this machine.
  virtual int RanksOnThisMachine() = 0;
  /// The watchdog's probe (collective on first use of an engine that has
  /// one: made before the cycle thread starts); null without one.
  virtual std::unique_ptr<RankProbe> MakeRankProbe() { return nullptr; }
  /// Whether a collective of this engine ends by itself on a lost peer
  /// (Gloo: its timeout), so the watchdog only warns.
  virtual bool transfers_time_out() const = 0;
  /// A collective has been stuck past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS on
  /// an engine whose transfers cannot be abandoned: ends the job (does not
  /// return).
  virtual void EndStuckJob() = 0;
};

/// The engine the configuration asks for, joined over `ranks` (a process
/// set; empty = all ranks). Throws ConfigError.
std::unique_ptr<Engine> MakeEngine(const RuntimeConfig& config);

}  // namespace hvdtune::internal
