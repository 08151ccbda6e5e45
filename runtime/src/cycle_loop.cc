// The cycle thread: negotiate, execute, apply knob updates, report.
#include <chrono>
#include <iostream>
#include <thread>

#include "runtime_impl.h"

namespace hvdtune::internal {

void RuntimeImpl::Loop() {
  bool stop = false;
  while (!stop) {
    const auto start = std::chrono::steady_clock::now();
    RunCycle(&stop);
    if (stop) break;
    const auto period =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double, std::milli>(
                cycle_knobs_.cycle_time_ms()));
    std::this_thread::sleep_until(start + period);
  }
  FailEverything(Status::Aborted("hvdtune runtime is shut down"));
}

void RuntimeImpl::RunCycle(bool* stop) {
  const double start = RuntimeClock();
  std::vector<Request> requests;
  std::optional<std::vector<std::uint8_t>> update;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests.reserve(queue_.size());
    while (!queue_.empty()) {
      TensorEntry e = std::move(queue_.front());
      queue_.pop_front();
      requests.push_back(e.request);
      std::string name = e.request.name;
      in_flight_.emplace(std::move(name), std::move(e));
    }
    if (mpi_.rank == 0 && pending_update_) {
      update = std::move(pending_update_);
      pending_update_.reset();
    }
  }
  const bool had_requests = !requests.empty();
  Controller::CycleResult result =
      controller_->RunCycle(std::move(requests), shutdown_requested_.load(),
                            update ? &*update : nullptr);
  const double negotiated = RuntimeClock();
  const double negotiation = negotiated - start;
  if (!result.status.ok()) {
    std::cerr << "[hvdtune rank " << mpi_.rank
              << "] negotiation failed, stopping: " << result.status.ToString()
              << std::endl;
    bus_.Emit(EventKind::kError, &EventSink::OnError,
              ErrorEvent{ErrorEvent::Kind::kNegotiation, "",
                         result.status.message(), negotiated});
    FailEverything(result.status);
    *stop = true;
    return;
  }
  {
    // Counted before the handles complete, so a caller that waited on a
    // tensor sees the cycle that ran it.
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.cycles;
    stats_.negotiation_seconds += negotiation;
    if (had_requests || !result.ready.empty()) {
      ++stats_.active_cycles;
      stats_.active_negotiation_seconds += negotiation;
    }
    stats_.cache_hits += result.cache_hits;
    stats_.cache_misses += result.cache_misses;
  }
  for (const StallEvent& stall : result.stalls) {
    bus_.Emit(EventKind::kStall, &EventSink::OnStall, stall);
  }
  ready_entries_.clear();
  for (const Response& r : result.ready) {
    TensorEntry& e = in_flight_.at(r.name);
    e.negotiated = negotiated;
    ready_entries_.push_back(&e);
  }
  tensors_this_cycle_ = 0;
  const ExecutionTotals totals =
      executor_->Run(result.ready, ready_entries_, cycle_knobs_,
                     config_.settings.fusion_lookahead, *this);
  if (result.knob_update) ApplyKnobUpdate(*result.knob_update);
  if (bus_.wants(EventKind::kCycle)) {
    CycleEvent e;
    e.cycle = stats_.cycles;  // only this thread writes it
    e.start = start;
    e.seconds = RuntimeClock() - start;
    e.negotiation_seconds = negotiation;
    e.tensors = tensors_this_cycle_;
    e.collectives = totals.collectives;
    e.bytes = totals.bytes;
    e.fused_bytes = totals.fused_bytes;
    e.fusion_threshold = cycle_knobs_.fusion_threshold_bytes();
    e.cache_hits = static_cast<int>(result.cache_hits);
    e.cache_misses = static_cast<int>(result.cache_misses);
    bus_.Emit(EventKind::kCycle, &EventSink::OnCycle, e);
  }
  if (autotuner_) PollAutotuner();
  if (result.shutdown) *stop = true;
}

void RuntimeImpl::PollAutotuner() {
  const double start = RuntimeClock();
  Autotuner::Output out;
  try {
    out = autotuner_->Poll(start);
    if (out.update) CheckKnobValues(*out.update);
  } catch (const std::exception& e) {
    // The autotuner reports its own failures as error events; this only
    // catches a broken one. The job goes on with the knobs in force.
    out = {};
    out.errors.push_back(
        {ErrorEvent::Kind::kAutotune, "", e.what(), RuntimeClock()});
  }
  for (const auto& e : out.samples)
    bus_.Emit(EventKind::kAutotuneSample, &EventSink::OnAutotuneSample, e);
  for (const auto& e : out.phase_changes) {
    bus_.Emit(EventKind::kPhaseChange, &EventSink::OnPhaseChange, e);
  }
  for (const auto& e : out.errors)
    bus_.Emit(EventKind::kError, &EventSink::OnError, e);
  std::lock_guard<std::mutex> lock(mu_);
  if (out.update && out.errors.empty()) QueueKnobUpdateLocked(*out.update);
  stats_.autotune_seconds += RuntimeClock() - start;
}

void RuntimeImpl::OnCollective(const CollectiveEvent& e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.collective_calls;
    if (e.ok && e.op == CollectiveType::kAllreduce) {
      stats_.bytes_allreduced += static_cast<std::uint64_t>(e.bytes);
    }
  }
  bus_.Emit(EventKind::kCollective, &EventSink::OnCollective, e);
}

void RuntimeImpl::Finish(TensorEntry& e, Status s, double started,
                         double finished, int fused_with,
                         double collective_started,
                         double collective_finished) {
  ++tensors_this_cycle_;
  if (bus_.wants(EventKind::kTensor)) {
    TensorEvent t;
    t.name = e.request.name;
    t.op = e.request.type;
    t.dtype = e.request.dtype;
    t.bytes = e.request.NumElements() *
              static_cast<std::int64_t>(DataTypeSize(e.request.dtype));
    t.enqueued = e.enqueued;
    t.negotiated = e.negotiated;
    t.started = started;
    t.finished = finished;
    t.collective_started = collective_started;
    t.collective_finished = collective_finished;
    t.fused_with = fused_with;
    t.status = s.code();
    bus_.Emit(EventKind::kTensor, &EventSink::OnTensor, t);
  }
  if (!s.ok() && bus_.wants(EventKind::kError)) {
    const auto kind =
        s.code() == StatusCode::kMismatch  ? ErrorEvent::Kind::kMismatch
        : s.code() == StatusCode::kStalled ? ErrorEvent::Kind::kStallShutdown
                                           : ErrorEvent::Kind::kBackend;
    bus_.Emit(EventKind::kError, &EventSink::OnError,
              ErrorEvent{kind, e.request.name, s.message(), finished});
  }
  std::shared_ptr<HandleState> handle = std::move(e.handle);
  const auto it = in_flight_.find(e.request.name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    names_in_flight_.erase(e.request.name);
    if (s.ok()) ++stats_.tensors_completed;
  }
  in_flight_.erase(it);  // `e` is gone from here on
  handle->Complete(std::move(s));
}

void RuntimeImpl::ApplyKnobUpdate(const std::vector<std::uint8_t>& bytes) {
  KnobUpdate update;
  try {
    update = DeserializeKnobUpdate(bytes, cycle_knobs_);
    CheckKnobValues(update.values);
  } catch (const std::exception& e) {
    // Every rank received the same bytes, so every rank skips the update.
    std::cerr << "[hvdtune rank " << mpi_.rank
              << "] ignoring a malformed knob update: " << e.what()
              << std::endl;
    return;
  }
  const KnobSettings previous = cycle_knobs_;
  if (update.values.cache_capacity() != cycle_knobs_.cache_capacity()) {
    controller_->ResizeCache(
        static_cast<std::size_t>(update.values.cache_capacity()));
  }
  cycle_knobs_ = update.values;
  std::uint64_t cycle = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    knobs_ = update.values;
    knob_version_ = update.version;
    stats_.knob_update_cycle = stats_.cycles;
    cycle = stats_.cycles;
  }
  bus_.Emit(EventKind::kKnobsApplied, &EventSink::OnKnobsApplied,
            KnobsAppliedEvent{update.version, cycle, previous, update.values,
                              RuntimeClock()});
}

void RuntimeImpl::FailEverything(const Status& s) {
  std::deque<TensorEntry> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    queued.swap(queue_);
    names_in_flight_.clear();
  }
  for (auto& [name, e] : in_flight_) e.handle->Complete(s);
  in_flight_.clear();
  for (TensorEntry& e : queued) e.handle->Complete(s);
}

}  // namespace hvdtune::internal
