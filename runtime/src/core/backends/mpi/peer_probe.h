// Which ranks can this rank still reach while a collective is stuck? A
// collective blocked on a peer that died, or on a link that went down,
// says nothing about whom it waits for. Every rank's watchdog thread keeps
// a receive posted on a communicator of its own and answers "are you
// there?" messages; a rank whose collective has waited too long asks every
// other rank, and the ranks that do not answer within a bound are the
// unreachable ones (dead, stopped, or behind a link that is down).
//
// Every call but the constructor comes from one thread (the watchdog's),
// concurrently with the cycle thread's MPI calls: the probe is only built
// where MPI provides MPI_THREAD_MULTIPLE.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace hvdtune::internal {

class PeerProbe {
 public:
  /// Collective over `comm` (duplicates it) and `local` (this node's ranks
  /// of `comm`, to name nodes in messages).
  PeerProbe(MPI_Comm comm, MPI_Comm local);
  /// Cancels the posted receive and frees the communicator.
  ~PeerProbe();
  PeerProbe(const PeerProbe&) = delete;
  PeerProbe& operator=(const PeerProbe&) = delete;

  /// Answers the questions that arrived since the last call (non-blocking).
  void Answer();
  /// Asks every other rank and waits up to `timeout_seconds` for the
  /// answers, answering others meanwhile. Returns the ranks that did not
  /// answer, ascending.
  std::vector<int> Unanswered(double timeout_seconds);
  /// "ranks 2, 3 (node 1)" / "rank 5 (node 2); ranks 6, 7 (node 3)".
  std::string Describe(const std::vector<int>& ranks) const;

 private:
  void PostQuestion();

  // Questions and answers travel on communicators of their own, as empty
  // messages whose tag is the asker's round: nothing to keep alive for a
  // send that may never complete (a rank that is gone), so sends are
  // handed to MPI at once (MPI_Request_free).
  MPI_Comm questions_ = MPI_COMM_NULL;
  MPI_Comm answers_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<int> node_of_rank_;
  MPI_Request question_ = MPI_REQUEST_NULL;
  int round_ = 0;
};

}  // namespace hvdtune::internal
