// A rank of a job started by `hvd-tune run --gloo` (no mpirun, MPI never
// initialised): checks what the launcher told it against the runtime, runs
// collectives whose results it checks, and, with --kill-rank R, has rank R
// die (SIGKILL) while every rank has collectives pending: the others must
// see their handles fail with an error naming rank R, within
// --within SECONDS, and exit normally. Prints one line per rank; exits 0 when
// this rank saw what it should.
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hvdtune/runtime.h"

namespace {

int Fail(int rank, const std::string& what) {
  std::printf("rank %d: FAIL: %s\n", rank, what.c_str());
  return 1;
}

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  int kill_rank = -1;
  double within = 0, kill_after = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--kill-rank") == 0)
      kill_rank = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--within") == 0) within = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--kill-after") == 0)
      kill_after = std::atof(argv[i + 1]);
  }
  using hvdtune::DataType;
  using hvdtune::ReduceOp;
  hvdtune::Runtime rt{hvdtune::RuntimeOptions{}};
  const int rank = rt.rank(), size = rt.size();
  if (rank != EnvInt("HOROVOD_RANK") || size != EnvInt("HOROVOD_SIZE")) {
    return Fail(rank, "rank/size differ from HOROVOD_RANK/HOROVOD_SIZE");
  }
  // HVDTUNE_RANKS_PER_NODE regroups the ranks into emulated nodes: the
  // launcher's local and cross ranks (one host) no longer apply.
  if (std::getenv("HVDTUNE_RANKS_PER_NODE") == nullptr &&
      (rt.local_rank() != EnvInt("HOROVOD_LOCAL_RANK") ||
       rt.local_size() != EnvInt("HOROVOD_LOCAL_SIZE") ||
       rt.cross_rank() != EnvInt("HOROVOD_CROSS_RANK") ||
       rt.cross_size() != EnvInt("HOROVOD_CROSS_SIZE"))) {
    return Fail(rank, "local/cross ranks differ from the launcher's");
  }
  int mpi_initialized = 1;
  MPI_Initialized(&mpi_initialized);
  if (mpi_initialized)
    return Fail(rank, "MPI was initialised on the Gloo path");

  // A checked allreduce and allgather.
  std::vector<float> x(1000), y(1000);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(rank + i);
  const std::int64_t shape[] = {1000};
  hvdtune::Status s = rt.Allreduce("x", x.data(), y.data(), shape,
                                   DataType::kFloat32, ReduceOp::kSum)
                          .Wait();
  if (!s.ok()) return Fail(rank, "allreduce: " + s.ToString());
  for (std::size_t i = 0; i < y.size(); ++i) {
    const float want = static_cast<float>(size * (size - 1) / 2 + size * i);
    if (y[i] != want)
      return Fail(rank, "allreduce result " + std::to_string(i));
  }

  if (kill_rank < 0) {
    std::printf("rank %d: ok (size %d, local %d/%d, cross %d/%d)\n", rank, size,
                rt.local_rank(), rt.local_size(), rt.cross_rank(),
                rt.cross_size());
    return 0;
  }
  // Every rank keeps a few collectives in flight; the doomed rank dies
  // while they are pending on the others: before its fourth step's
  // collectives (the others fail in the negotiation), or, with
  // --kill-after S, S seconds into steps of 32 MiB tensors (most likely in
  // the middle of a transfer: the larger the step, the smaller the share
  // of the negotiation between steps).
  const std::size_t floats = kill_after >= 0 ? 1 << 23 : 1 << 18;
  std::vector<std::vector<float>> bufs(4, std::vector<float>(floats, 1.0f));
  std::thread killer;
  if (rank == kill_rank && kill_after >= 0) {
    killer = std::thread([kill_after] {
      std::this_thread::sleep_for(std::chrono::duration<double>(kill_after));
      std::raise(SIGKILL);
    });
    killer.detach();
  }
  for (int step = 0;; ++step) {
    // The failing handles' wait is timed from their submission.
    const auto start = std::chrono::steady_clock::now();
    if (rank == kill_rank && kill_after < 0 && step == 3) std::raise(SIGKILL);
    std::vector<hvdtune::Handle> pending;
    for (std::size_t b = 0; b < bufs.size(); ++b) {
      const std::int64_t n[] = {static_cast<std::int64_t>(bufs[b].size())};
      pending.push_back(rt.Allreduce("g" + std::to_string(b), bufs[b].data(),
                                     bufs[b].data(), n, DataType::kFloat32,
                                     ReduceOp::kAverage));
    }
    for (const hvdtune::Handle& h : pending) {
      s = h.Wait();
      if (s.ok()) continue;
      const double took = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count();
      const std::string lost = "rank " + std::to_string(kill_rank);
      std::printf("rank %d: handle failed after %.2f s: %s\n", rank, took,
                  s.ToString().c_str());
      if (s.ToString().find(lost) == std::string::npos) {
        return Fail(rank, "the error does not name " + lost);
      }
      if (within > 0 && took > within) {
        return Fail(rank, "failed later than " + std::to_string(within) + " s");
      }
      return 0;
    }
    if (step > 100000) return Fail(rank, "no failure");
  }
}
