#include "controller.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace hvdtune::internal {
namespace {

// Word 0 of the bit vector holds flags that any rank may raise. The vector
// is reduced with bitwise AND, so "any" flags are stored inverted.
constexpr std::uint64_t kFlagUncached = 1u << 0;
constexpr std::uint64_t kFlagShutdown = 1u << 1;
constexpr std::uint64_t kFlagKnobUpdate = 1u << 2;

std::size_t WordsFor(std::size_t bits) { return (bits + 63) / 64; }

// Waits for a request. With tensors waiting on this rank it polls like
// MPI's own wait; when idle it sleeps briefly between tests instead: the
// negotiation runs every cycle even when nothing is ready, and a spinning
// wait there takes a core from the application (and, with more ranks than
// cores, from the other ranks).
int WaitSleeping(MPI_Request* req, bool busy) {
  int done = 0;
  auto pause = std::chrono::microseconds(2);
  for (int spins = 0;; ++spins) {
    const int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    if (busy || spins < 16) continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(50));
  }
}

double SteadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Controller::Controller(const MpiContext& mpi, std::size_t cache_capacity,
                       StallSettings stall, double (*clock)())
    : mpi_(mpi),
      cache_(cache_capacity),
      stall_(stall),
      clock_(clock ? clock : &SteadySeconds),
      coordinator_(mpi.size, stall) {}

void Controller::Reroute(std::uint32_t bit) {
  const auto it = hit_pending_.find(bit);
  if (it == hit_pending_.end()) return;
  to_send_.push_back(pending_.at(it->second));
  hit_pending_.erase(it);
}

void Controller::ResizeCache(std::size_t capacity) {
  for (const auto& [bit, name] : hit_pending_) {
    to_send_.push_back(pending_.at(name));
  }
  hit_pending_.clear();
  cache_ = ResponseCache(capacity);
}

Controller::CycleResult Controller::RunCycle(
    std::vector<Request> requests, bool shutdown,
    const std::vector<std::uint8_t>* knob_update) {
  CycleResult result;
  const double now = clock_();
  invalid_.clear();
  for (Request& r : requests) {
    r.rank = mpi_.rank;
    const ResponseCache::Lookup found = cache_.Find(r);
    if (found.state == ResponseCache::State::kHit) {
      hit_pending_[found.bit] = r.name;
      ++result.cache_hits;
    } else {
      if (found.state == ResponseCache::State::kInvalid) {
        invalid_.push_back(found.bit);
      }
      to_send_.push_back(r);
      ++result.cache_misses;
    }
    pending_.emplace(r.name, std::move(r));
  }
  // The stall scans visit every waiting tensor: a few times per stall
  // period is enough, and keeps them off most cycles.
  const double threshold = StallThreshold(stall_);
  if (threshold > 0 && now >= next_stall_scan_) {
    next_stall_scan_ = now + std::clamp(threshold / 10, 0.01, 1.0);
    InvalidateStalledHits(now);
    if (mpi_.rank == 0) {
      coordinator_.CheckStalls(now, &result.stalls, &stalled_);
    }
  }

  // [flags][hit bits][invalid bits (inverted)]
  const std::size_t words = WordsFor(cache_.capacity());
  bits_.assign(1 + 2 * words, 0);
  std::uint64_t flags = 0;
  if (!to_send_.empty() || !stalled_.empty()) flags |= kFlagUncached;
  if (shutdown) flags |= kFlagShutdown;
  if (mpi_.rank == 0 && knob_update != nullptr) flags |= kFlagKnobUpdate;
  bits_[0] = ~flags;
  for (const auto& [bit, name] : hit_pending_) {
    bits_[1 + bit / 64] |= std::uint64_t{1} << (bit % 64);
  }
  for (std::size_t w = 0; w < words; ++w) bits_[1 + words + w] = ~0ull;
  for (std::uint32_t bit : invalid_) {
    bits_[1 + words + bit / 64] &= ~(std::uint64_t{1} << (bit % 64));
  }
  MPI_Request req;
  int rc =
      MPI_Iallreduce(MPI_IN_PLACE, bits_.data(), static_cast<int>(bits_.size()),
                     MPI_UINT64_T, MPI_BAND, mpi_.control, &req);
  if (rc == MPI_SUCCESS) rc = WaitSleeping(&req, !pending_.empty());
  if (rc != MPI_SUCCESS) {
    result.status = MpiError("MPI_Allreduce (negotiation)", rc);
    return result;
  }
  flags = ~bits_[0];
  result.shutdown = (flags & kFlagShutdown) != 0;

  // Same order of cache operations on every rank: erase invalid entries,
  // then take the hits, then insert newly negotiated responses.
  for (std::size_t w = 0; w < words; ++w) {
    std::uint64_t inv = ~bits_[1 + words + w];
    while (inv) {
      const auto bit =
          static_cast<std::uint32_t>(w * 64 + std::countr_zero(inv));
      inv &= inv - 1;
      Reroute(bit);
      cache_.Erase(bit);
      bits_[1 + w] &= ~(std::uint64_t{1} << (bit % 64));
    }
  }
  for (std::size_t w = 0; w < words; ++w) {
    std::uint64_t hits = bits_[1 + w];
    while (hits) {
      const auto bit =
          static_cast<std::uint32_t>(w * 64 + std::countr_zero(hits));
      hits &= hits - 1;
      const auto it = hit_pending_.find(bit);
      if (it == hit_pending_.end() || !cache_.Contains(bit)) {
        result.status = Status::Internal("response cache out of sync");
        return result;
      }
      result.ready.push_back(cache_.response(bit));
      cache_.Touch(bit);
      pending_.erase(it->second);
      hit_pending_.erase(it);
    }
  }

  if (flags & kFlagUncached) {
    result.status = Negotiate(&result.ready);
    if (!result.status.ok()) return result;
  }

  result.ready = groups_.Release(std::move(result.ready));

  if (flags & kFlagKnobUpdate) {
    std::vector<std::uint8_t> bytes;
    if (mpi_.rank == 0) bytes = *knob_update;
    result.status = Broadcast(&bytes);
    if (!result.status.ok()) return result;
    result.knob_update = std::move(bytes);
  }
  return result;
}

Status Controller::Broadcast(std::vector<std::uint8_t>* bytes) {
  std::int64_t n = static_cast<std::int64_t>(bytes->size());
  int rc = MPI_Bcast(&n, 1, MPI_INT64_T, 0, mpi_.control);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast (negotiation)", rc);
  bytes->resize(static_cast<std::size_t>(n));
  rc = MPI_Bcast(bytes->data(), static_cast<int>(n), MPI_BYTE, 0, mpi_.control);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast (negotiation)", rc);
  return Status::Ok();
}

Status Controller::Negotiate(std::vector<Response>* ready) {
  const double now = clock_();
  for (Request& r : to_send_) r.waited_seconds = now - r.enqueued;
  const std::vector<std::uint8_t> mine = SerializeRequests(to_send_);
  to_send_.clear();
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(mpi_.rank == 0 ? mpi_.size : 0);
  int rc =
      MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, mpi_.control);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Gather (negotiation)", rc);
  std::vector<int> displs(lens.size());
  std::vector<std::uint8_t> all;
  if (mpi_.rank == 0) {
    int total = 0;
    for (std::size_t r = 0; r < lens.size(); ++r) {
      displs[r] = total;
      total += lens[r];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  rc = MPI_Gatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(),
                   displs.data(), MPI_BYTE, 0, mpi_.control);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Gatherv (negotiation)", rc);

  std::vector<std::uint8_t> answer;
  if (mpi_.rank == 0) {
    std::vector<Request> received;
    try {
      for (std::size_t r = 0; r < lens.size(); ++r) {
        std::vector<Request> part =
            DeserializeRequests(all.data() + displs[r], lens[r]);
        for (Request& q : part) received.push_back(std::move(q));
      }
    } catch (const std::exception& e) {
      return Status::Internal(std::string("bad negotiation message: ") +
                              e.what());
    }
    std::vector<Response> out = coordinator_.Add(std::move(received), now);
    for (Response& r : stalled_) out.push_back(std::move(r));
    stalled_.clear();
    answer = SerializeResponses(out);
  }
  Status s = Broadcast(&answer);
  if (!s.ok()) return s;
  std::vector<Response> responses;
  try {
    responses = DeserializeResponses(answer.data(), answer.size());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("bad negotiation answer: ") + e.what());
  }
  std::vector<std::uint32_t> displaced;
  for (Response& resp : responses) {
    const auto it = pending_.find(resp.name);
    if (resp.stalled) {
      // Ends the tensor where it was submitted; elsewhere nothing waits.
      if (it == pending_.end()) continue;
      std::erase_if(hit_pending_,
                    [&](const auto& kv) { return kv.second == resp.name; });
      pending_.erase(it);
      ready->push_back(std::move(resp));
      continue;
    }
    if (it == pending_.end()) {
      return Status::Internal("negotiated tensor '" + resp.name +
                              "' is not pending on rank " +
                              std::to_string(mpi_.rank));
    }
    if (resp.kind == Response::Kind::kRun) {
      displaced.clear();
      cache_.Put(resp, it->second, &displaced);
      for (std::uint32_t bit : displaced) Reroute(bit);
    }
    pending_.erase(it);
    ready->push_back(std::move(resp));
  }
  return Status::Ok();
}

void Controller::InvalidateStalledHits(double now) {
  const double threshold = StallThreshold(stall_);
  for (const auto& [bit, name] : hit_pending_) {
    if (now - pending_.at(name).enqueued > threshold) invalid_.push_back(bit);
  }
}

}  // namespace hvdtune::internal
