#include "core/controller.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <iostream>
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
constexpr std::uint64_t kFlagJoined = 1u << 3;

std::size_t WordsFor(std::size_t bits) { return (bits + 63) / 64; }

// Waits for the negotiation's allreduce. Other ranks may be far behind
// (computing, or sleeping out their cycle time), and with more ranks than
// cores a spinning wait takes the core a late rank needs. So: test in a
// tight loop only briefly (long enough for ranks that arrive together),
// then sleep between tests, longer and longer. With tensors of this rank
// waiting the sleeps stay short, so the round completes soon after the
// last rank arrives; when idle they grow to a fifth of a millisecond.
// `keep_waiting(seconds waited)` is asked between sleeps; false abandons
// the request (returns MPI_ERR_PENDING with the request still posted).
template <typename KeepWaiting>
int WaitSleeping(MPI_Request* req, bool busy, KeepWaiting keep_waiting) {
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

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
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
      hit_id_(cache_capacity, kNoTensorId),
      hit_words_(WordsFor(cache_capacity), 0),
      coordinator_(mpi.size, stall) {}

void Controller::SendInFull(TensorId id) {
  const Request& r = *pending_[id];
  negotiating_.emplace(r.name, id);
  to_send_.push_back(r);
  to_send_.back().rank = mpi_.rank;
}

void Controller::AddHit(std::uint32_t bit, TensorId id) {
  if (bit >= hit_id_.size()) {
    hit_id_.resize(cache_.capacity(), kNoTensorId);
    hit_words_.resize(WordsFor(cache_.capacity()), 0);
  }
  hit_id_[bit] = id;
  hit_words_[bit / 64] |= std::uint64_t{1} << (bit % 64);
  ++hit_count_;
}

void Controller::Reroute(std::uint32_t bit) {
  if (bit >= hit_id_.size() || hit_id_[bit] == kNoTensorId) return;
  SendInFull(hit_id_[bit]);
  hit_id_[bit] = kNoTensorId;
  hit_words_[bit / 64] &= ~(std::uint64_t{1} << (bit % 64));
  --hit_count_;
}

void Controller::ClearHits() {
  std::fill(hit_id_.begin(), hit_id_.end(), kNoTensorId);
  std::fill(hit_words_.begin(), hit_words_.end(), 0);
  hit_count_ = 0;
}

void Controller::ResizeCache(std::size_t capacity) {
  for (std::uint32_t bit = 0; bit < hit_id_.size(); ++bit) {
    if (hit_id_[bit] != kNoTensorId) SendInFull(hit_id_[bit]);
  }
  ClearHits();
  cache_ = ResponseCache(capacity);
  hit_id_.assign(capacity, kNoTensorId);
  hit_words_.assign(WordsFor(capacity), 0);
}

void Controller::RunCycle(const std::vector<const Request*>& requests,
                          bool shutdown,
                          const std::vector<std::uint8_t>* knob_update,
                          CycleResult* out) {
  CycleResult& result = *out;
  result.ready.clear();
  result.shutdown = false;
  result.knob_update.reset();
  result.cache_hits = result.cache_misses = 0;
  result.status = Status::Ok();
  result.stalls.clear();
  const double now = clock_();
  invalid_.clear();
  for (const Request* r : requests) {
    if (r->id >= pending_.size()) pending_.resize(r->id + 1, nullptr);
    pending_[r->id] = r;
    ++pending_count_;
    if (r->type == CollectiveType::kJoin) joined_ = true;
    const ResponseCache::Lookup found = cache_.Find(*r);
    if (found.state == ResponseCache::State::kHit && !join_active_) {
      AddHit(found.bit, r->id);
      ++result.cache_hits;
    } else {
      if (found.state == ResponseCache::State::kInvalid) {
        invalid_.push_back(found.bit);
      }
      SendInFull(r->id);
      ++result.cache_misses;
    }
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
  if (joined_) flags |= kFlagJoined;
  bits_[0] = ~flags;
  std::copy(hit_words_.begin(), hit_words_.end(), bits_.begin() + 1);
  for (std::size_t w = 0; w < words; ++w) bits_[1 + words + w] = ~0ull;
  for (std::uint32_t bit : invalid_) {
    bits_[1 + words + bit / 64] &= ~(std::uint64_t{1} << (bit % 64));
  }
  MPI_Request req;
  current_ = &result;
  result.status = Await(
      MPI_Iallreduce(MPI_IN_PLACE, bits_.data(), static_cast<int>(bits_.size()),
                     MPI_UINT64_T, MPI_BAND, mpi_.control, &req),
      &req, "MPI_Allreduce (negotiation)");
  if (!result.status.ok()) return;
  flags = ~bits_[0];
  result.shutdown = (flags & kFlagShutdown) != 0;
  join_active_ = (flags & kFlagJoined) != 0;

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
  if (join_active_) {
    // A joined rank sets no cache bits: what waits on one is negotiated in
    // full, where rank 0 counts the joined ranks in.
    for (std::uint32_t bit = 0; bit < hit_id_.size(); ++bit) Reroute(bit);
    std::fill(bits_.begin() + 1, bits_.begin() + 1 + words, 0);
  }
  for (std::size_t w = 0; w < words; ++w) {
    std::uint64_t hits = bits_[1 + w];
    while (hits) {
      const auto bit =
          static_cast<std::uint32_t>(w * 64 + std::countr_zero(hits));
      hits &= hits - 1;
      const TensorId id = bit < hit_id_.size() ? hit_id_[bit] : kNoTensorId;
      if (id == kNoTensorId || !cache_.Contains(bit)) {
        result.status = Status::Internal("response cache out of sync");
        return;
      }
      // Everything but the name (no string copy per tensor): the runtime
      // finds the tensor by id.
      const Response& cached = cache_.response(bit);
      Response& r = result.ready.emplace_back();
      r.kind = cached.kind;
      r.type = cached.type;
      r.dtype = cached.dtype;
      r.op = cached.op;
      r.root = cached.root;
      r.first_dims = cached.first_dims;
      r.error = cached.error;
      r.group = cached.group;
      r.group_size = cached.group_size;
      r.device = cached.device;
      r.shape = cached.shape;
      r.joined = cached.joined;
      r.id = id;
      cache_.Touch(bit);
      pending_[id] = nullptr;
      --pending_count_;
      hit_id_[bit] = kNoTensorId;
      hit_words_[bit / 64] &= ~(std::uint64_t{1} << (bit % 64));
      --hit_count_;
    }
  }

  if (flags & kFlagUncached) {
    result.status = Negotiate(&result.ready);
    if (!result.status.ok()) return;
  }

  groups_.Release(&result.ready);

  if (flags & kFlagKnobUpdate) {
    std::vector<std::uint8_t> bytes;
    if (mpi_.rank == 0) bytes = *knob_update;
    result.status = Broadcast(&bytes);
    if (!result.status.ok()) return;
    result.knob_update = std::move(bytes);
  }
}

Status Controller::Await(int rc, MPI_Request* req, const char* what) {
  if (rc == MPI_SUCCESS) {
    wait_warnings_ = 0;
    rc = WaitSleeping(req, pending_count_ > 0,
                      [&](double waited) { return KeepWaiting(waited); });
  }
  if (rc == MPI_ERR_PENDING) {
    // The collective stays posted, on member buffers that must outlive it.
    abandoned_ = true;
    return Status::Stalled(
        "the negotiation waited " + FormatSeconds(stall_.shutdown_seconds) +
        " s in " + what +
        " for ranks that stopped calling into hvdtune (stopped, hung or "
        "dead processes, or ranks that left the training loop; "
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS): the runtime stops");
  }
  if (rc != MPI_SUCCESS) return MpiError(what, rc);
  return Status::Ok();
}

Status Controller::Broadcast(std::vector<std::uint8_t>* bytes) {
  MPI_Request req;
  bcast_len_ = static_cast<std::int64_t>(bytes->size());
  Status s =
      Await(MPI_Ibcast(&bcast_len_, 1, MPI_INT64_T, 0, mpi_.control, &req),
            &req, "MPI_Bcast (negotiation)");
  if (!s.ok()) return s;
  bcast_buf_ = std::move(*bytes);
  bcast_buf_.resize(static_cast<std::size_t>(bcast_len_));
  s = Await(MPI_Ibcast(bcast_buf_.data(), static_cast<int>(bcast_len_),
                       MPI_BYTE, 0, mpi_.control, &req),
            &req, "MPI_Bcast (negotiation)");
  if (!s.ok()) return s;
  *bytes = std::move(bcast_buf_);
  return Status::Ok();
}

Status Controller::Negotiate(std::vector<Response>* ready) {
  const double now = clock_();
  for (Request& r : to_send_) r.waited_seconds = now - r.enqueued;
  // Member buffers: a collective given up on stopped ranks stays posted.
  gather_mine_ = SerializeRequests(to_send_);
  to_send_.clear();
  gather_len_ = static_cast<int>(gather_mine_.size());
  std::vector<int>& lens = gather_lens_;
  lens.assign(mpi_.rank == 0 ? mpi_.size : 0, 0);
  MPI_Request req;
  Status s = Await(MPI_Igather(&gather_len_, 1, MPI_INT, lens.data(), 1,
                               MPI_INT, 0, mpi_.control, &req),
                   &req, "MPI_Gather (negotiation)");
  if (!s.ok()) return s;
  std::vector<int>& displs = gather_displs_;
  displs.assign(lens.size(), 0);
  std::vector<std::uint8_t>& all = gather_all_;
  all.clear();
  if (mpi_.rank == 0) {
    int total = 0;
    for (std::size_t r = 0; r < lens.size(); ++r) {
      displs[r] = total;
      total += lens[r];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  s = Await(
      MPI_Igatherv(gather_mine_.data(), gather_len_, MPI_BYTE, all.data(),
                   lens.data(), displs.data(), MPI_BYTE, 0, mpi_.control, &req),
      &req, "MPI_Gatherv (negotiation)");
  if (!s.ok()) return s;

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
  s = Broadcast(&answer);
  if (!s.ok()) return s;
  std::vector<Response> responses;
  try {
    responses = DeserializeResponses(answer.data(), answer.size());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("bad negotiation answer: ") + e.what());
  }
  std::vector<std::uint32_t> displaced;
  for (Response& resp : responses) {
    const auto it = negotiating_.find(resp.name);
    if (resp.stalled) {
      // Ends the tensor where it was submitted; elsewhere nothing waits.
      // It may be waiting on a cache bit rather than in full negotiation.
      TensorId id = kNoTensorId;
      if (it != negotiating_.end()) {
        id = it->second;
        negotiating_.erase(it);
      } else {
        for (std::uint32_t bit = 0; bit < hit_id_.size(); ++bit) {
          const TensorId h = hit_id_[bit];
          if (h != kNoTensorId && pending_[h]->name == resp.name) {
            id = h;
            hit_id_[bit] = kNoTensorId;
            hit_words_[bit / 64] &= ~(std::uint64_t{1} << (bit % 64));
            --hit_count_;
            break;
          }
        }
      }
      if (id == kNoTensorId) continue;
      std::erase_if(to_send_, [&](const Request& q) { return q.id == id; });
      pending_[id] = nullptr;
      --pending_count_;
      resp.id = id;
      ready->push_back(std::move(resp));
      continue;
    }
    if (it == negotiating_.end()) {
      if (joined_) {
        // Another rank's tensor while this one has joined: an allreduce it
        // takes part in with neutral elements (a stand-in entry, no id);
        // nothing to do for a barrier or a failure.
        if (resp.kind == Response::Kind::kRun && resp.joined &&
            resp.type == CollectiveType::kAllreduce) {
          resp.id = kNoTensorId;
          ready->push_back(std::move(resp));
        }
        continue;
      }
      return Status::Internal("negotiated tensor '" + resp.name +
                              "' is not pending on rank " +
                              std::to_string(mpi_.rank));
    }
    const TensorId id = it->second;
    negotiating_.erase(it);
    if (resp.type == CollectiveType::kJoin) joined_ = false;
    if (resp.kind == Response::Kind::kRun && !resp.joined &&
        resp.type != CollectiveType::kJoin) {
      displaced.clear();
      cache_.Put(resp, *pending_[id], &displaced);
      for (std::uint32_t bit : displaced) Reroute(bit);
    }
    pending_[id] = nullptr;
    --pending_count_;
    resp.id = id;
    ready->push_back(std::move(resp));
  }
  return Status::Ok();
}

bool Controller::KeepWaiting(double waited) {
  if (stall_.shutdown_seconds > 0 && waited >= stall_.shutdown_seconds) {
    return false;
  }
  const double check = stall_.check_seconds;
  if (check > 0 && waited >= check * static_cast<double>(wait_warnings_ + 1)) {
    ++wait_warnings_;
    std::cerr << "[hvdtune rank " << mpi_.rank << "] WARNING: waited "
              << FormatSeconds(waited)
              << " s in negotiation for the other ranks: some rank has "
                 "stopped calling into hvdtune (a stopped, hung or dead "
                 "process, or one that left the training loop; "
                 "HOROVOD_STALL_CHECK_TIME_SECONDS)"
              << std::endl;
    if (current_) current_->stalls.push_back({"", {}, waited, false, clock_()});
  }
  return true;
}

void Controller::InvalidateStalledHits(double now) {
  const double threshold = StallThreshold(stall_);
  for (std::uint32_t bit = 0; bit < hit_id_.size(); ++bit) {
    const TensorId id = hit_id_[bit];
    if (id != kNoTensorId && now - pending_[id]->enqueued > threshold) {
      invalid_.push_back(bit);
    }
  }
}

}  // namespace hvdtune::internal
