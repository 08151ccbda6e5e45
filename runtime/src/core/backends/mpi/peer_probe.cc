#include "core/backends/mpi/peer_probe.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace hvdtune::internal {

namespace {

// Rounds cycle through tags 0..kRounds-1 (MPI guarantees tags up to 32767).
constexpr int kRounds = 32000;

}  // namespace

PeerProbe::PeerProbe(MPI_Comm comm, MPI_Comm local) {
  MPI_Comm_dup(comm, &questions_);
  MPI_Comm_dup(comm, &answers_);
  MPI_Comm_set_errhandler(questions_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(answers_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  // A node is known by its lowest rank; nodes are numbered in that order.
  int leader = rank_;
  MPI_Allreduce(&rank_, &leader, 1, MPI_INT, MPI_MIN, local);
  std::vector<int> leaders(static_cast<std::size_t>(size_), 0);
  MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm);
  std::vector<int> sorted = leaders;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  node_of_rank_.reserve(leaders.size());
  for (int l : leaders) {
    node_of_rank_.push_back(static_cast<int>(
        std::lower_bound(sorted.begin(), sorted.end(), l) - sorted.begin()));
  }
  PostQuestion();
}

PeerProbe::~PeerProbe() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (question_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&question_);
    MPI_Wait(&question_, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&answers_);
  MPI_Comm_free(&questions_);
}

void PeerProbe::PostQuestion() {
  MPI_Irecv(nullptr, 0, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, questions_,
            &question_);
}

void PeerProbe::Answer() {
  for (;;) {
    int done = 0;
    MPI_Status status;
    if (MPI_Test(&question_, &done, &status) != MPI_SUCCESS || !done) return;
    MPI_Request answer = MPI_REQUEST_NULL;
    if (MPI_Isend(nullptr, 0, MPI_INT, status.MPI_SOURCE, status.MPI_TAG,
                  answers_, &answer) == MPI_SUCCESS) {
      MPI_Request_free(&answer);
    }
    PostQuestion();
  }
}

std::vector<int> PeerProbe::Unanswered(double timeout_seconds) {
  const int tag = round_;
  round_ = (round_ + 1) % kRounds;
  std::vector<int> peers;
  std::vector<MPI_Request> waiting;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request recv = MPI_REQUEST_NULL;
    MPI_Irecv(nullptr, 0, MPI_INT, r, tag, answers_, &recv);
    peers.push_back(r);
    waiting.push_back(recv);
  }
  for (int r : peers) {
    MPI_Request ask = MPI_REQUEST_NULL;
    if (MPI_Isend(nullptr, 0, MPI_INT, r, tag, questions_, &ask) ==
        MPI_SUCCESS) {
      MPI_Request_free(&ask);
    }
  }
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(timeout_seconds));
  for (;;) {
    Answer();
    bool all = true;
    for (MPI_Request& w : waiting) {
      if (w == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Test(&w, &done, MPI_STATUS_IGNORE);
      if (!done) all = false;
    }
    if (all || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<int> missing;
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    if (waiting[i] == MPI_REQUEST_NULL) continue;
    missing.push_back(peers[i]);
    // A receive can always be cancelled; an answer arriving later stays
    // unmatched (its tag belongs to this round only).
    MPI_Cancel(&waiting[i]);
    MPI_Wait(&waiting[i], MPI_STATUS_IGNORE);
  }
  return missing;
}

std::string PeerProbe::Describe(const std::vector<int>& ranks) const {
  // Consecutive runs of ranks on one node: "ranks 2, 3 (node 1)".
  std::string out;
  std::size_t i = 0;
  while (i < ranks.size()) {
    const int node = node_of_rank_[static_cast<std::size_t>(ranks[i])];
    std::size_t j = i;
    while (j < ranks.size() &&
           node_of_rank_[static_cast<std::size_t>(ranks[j])] == node) {
      ++j;
    }
    if (!out.empty()) out += "; ";
    out += j - i == 1 ? "rank " : "ranks ";
    for (std::size_t k = i; k < j; ++k) {
      if (k > i) out += ", ";
      out += std::to_string(ranks[k]);
    }
    out += " (node " + std::to_string(node) + ")";
    i = j;
  }
  return out;
}

}  // namespace hvdtune::internal
