// The cycle thread: negotiate, execute, apply knob updates, report.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "core/reduce.h"
#include "core/runtime_impl.h"
#include "core/thread_scheduling.h"

namespace hvdtune::internal {

void RuntimeImpl::Loop() {
  PrepareCycleThread(config_.settings, /*warn=*/mpi_.rank == 0);
  boost_.emplace();
  boost_->Apply(cycle_knobs_.cycle_thread_boost(), /*warn=*/mpi_.rank == 0);
  bool stop = false;
  while (!stop) {
    const auto start = std::chrono::steady_clock::now();
    const bool active = RunCycle(&stop);
    if (stop) break;
    const auto period =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double, std::milli>(
                cycle_knobs_.cycle_time_ms()));
    // Tensors of this rank that other ranks have not submitted yet: go
    // straight into the next negotiation, so that this rank is already
    // waiting there when the others arrive (they do not wait for its timer).
    // A round with nothing new from this rank, nothing ready, that did not
    // wait for anyone either means every rank waits on something that is
    // not coming yet: fall back to the timer rather than spin.
    const auto took = std::chrono::steady_clock::now() - start;
    if (controller_->pending() > 0 && (active || took * 4 >= period)) {
      continue;
    }
    WaitForWork(start + period);
  }
  FailEverything(Status::Aborted("hvdtune runtime is shut down"));
}

void RuntimeImpl::WaitForWork(std::chrono::steady_clock::time_point deadline) {
  bool arrived;
  {
    std::unique_lock<std::mutex> lock(mu_);
    work_cv_.wait_until(lock, deadline, [&] {
      return idle_arrival_ || shutdown_requested_.load();
    });
    arrived = idle_arrival_;
  }
  if (arrived && gather_arrivals_) GatherArrivals();
}

void RuntimeImpl::GatherArrivals() {
  // A lone collective starts at once. A burst of submissions (a model's
  // gradients in a loop) is gathered until the caller waits on or polls a
  // handle, the submissions pause for kQuietGap (doubling while they go
  // on), or cycle_time has passed since the first one, so that one
  // negotiation agrees on all of it instead of one per wake-up while every
  // rank is still submitting. The gap is many times a submission's cost.
  constexpr auto kQuietGap = std::chrono::microseconds(30);
  constexpr auto kSpin = std::chrono::microseconds(3);
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double, std::milli>(
                             cycle_knobs_.cycle_time_ms()));
  std::uint64_t since, first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    since = arrival_waits_;
    first = arrival_enqueued_;
  }
  WaitSignal& signal = signal_;
  const auto stop = [&] {
    return signal.waits.load() != since || shutdown_requested_.load();
  };
  // Nothing more since the first tensor: a burst's next submission comes
  // within a microsecond, a synchronous caller's wait about as soon. Poll
  // for either briefly (this runs only with a hardware thread per rank, so
  // it takes no one's core); a lone collective then starts at once.
  const auto spin_until = Clock::now() + kSpin;
  while (enqueued_.load(std::memory_order_relaxed) == first) {
    if (stop() || Clock::now() >= spin_until) return;
    // If this thread shares a core with the application, let it go on.
    std::this_thread::yield();
  }
  signal.gathering = true;
  auto pause = std::chrono::duration_cast<Clock::duration>(kQuietGap);
  while (!stop()) {
    const std::uint64_t seen = enqueued_.load(std::memory_order_relaxed);
    const auto until = std::min(Clock::now() + pause, deadline);
    pause *= 2;
    {
      std::unique_lock<std::mutex> lock(signal.mu);
      signal.cv.wait_until(lock, until, stop);
    }
    if (Clock::now() >= deadline ||
        enqueued_.load(std::memory_order_relaxed) == seen) {
      break;
    }
  }
  signal.gathering = false;
}

bool RuntimeImpl::RunCycle(bool* stop) {
  ApplyTimelineChange();
  const double start = RuntimeClock();
  std::optional<std::vector<std::uint8_t>> update;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drained_.swap(queue_);
    drained_size_ = queue_size_;
    queue_size_ = 0;
    idle_arrival_ = false;
    if (mpi_.rank == 0 && pending_update_) {
      update = std::move(pending_update_);
      pending_update_.reset();
    }
  }
  requests_.clear();
  for (std::size_t i = 0; i < drained_size_; ++i) {
    std::unique_ptr<TensorEntry>& e = drained_[i];
    const TensorId id = e->request.id;
    if (id >= slots_.size()) slots_.resize(id + 1);
    // The slot's finished entry goes back to the queue as a spare, with
    // its buffers.
    slots_[id].swap(e);
    requests_.push_back(&slots_[id]->request);
  }
  const bool had_requests = !requests_.empty();
  Controller::CycleResult& result = cycle_result_;
  controller_->RunCycle(requests_, shutdown_requested_.load(),
                        update ? &*update : nullptr, &result);
  const double negotiated = RuntimeClock();
  const double negotiation = negotiated - start;
  if (!result.status.ok()) {
    std::cerr << "[hvdtune rank " << mpi_.rank
              << "] negotiation failed, stopping: " << result.status.ToString()
              << std::endl;
    for (const StallEvent& stall : result.stalls) {
      bus_.Emit(EventKind::kStall, &EventSink::OnStall, stall);
    }
    bus_.Emit(EventKind::kError, &EventSink::OnError,
              ErrorEvent{result.status.code() == StatusCode::kStalled
                             ? ErrorEvent::Kind::kStallShutdown
                             : ErrorEvent::Kind::kNegotiation,
                         "", result.status.message(), negotiated});
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_reason_ = result.status;
    }
    FailEverything(result.status);
    *stop = true;
    return false;
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
  std::size_t stand_ins = 0;
  for (const Response& r : result.ready) {
    if (r.id == kNoTensorId) {
      ready_entries_.push_back(StandIn(r, stand_ins++));
      continue;
    }
    TensorEntry& e = *slots_[r.id];
    e.negotiated = negotiated;
    ready_entries_.push_back(&e);
  }
  tensors_this_cycle_ = 0;
  if (watchdog_.joinable() && !ready_entries_.empty()) {
    {
      std::lock_guard<std::mutex> lock(watchdog_mu_);
      executing_first_ = ready_entries_.front()->request.name;
    }
    executing_count_ = ready_entries_.size();
    executing_since_ = CoarseRuntimeClock();
  }
  const ExecutionTotals totals =
      executor_->Run(result.ready, ready_entries_, cycle_knobs_,
                     config_.settings.fusion_lookahead, *this);
  executing_since_ = 0.0;
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
  return had_requests || !result.ready.empty();
}

namespace {

std::string WatchdogSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

void RuntimeImpl::Watchdog() {
  const double check = config_.settings.stall_check_seconds;
  const double limit = config_.settings.stall_shutdown_seconds;
  // The other ranks are asked halfway to the first stall time, so that the
  // answer is there for the warning or the shutdown, and the metrics show
  // it while the stall lasts.
  const double ask_at =
      0.5 * (check > 0 && (limit <= 0 || check < limit) ? check : limit);
  // Each wait is known by its start (executing_since_).
  double asked_for = 0, warned_for = 0;
  int unreachable = 0;
  std::string who;
  std::unique_lock<std::mutex> lock(watchdog_mu_);
  while (!watchdog_stop_) {
    watchdog_cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (watchdog_stop_) break;
    const std::string first = executing_first_;
    lock.unlock();
    // Answering the others' questions comes first: a rank that waits for
    // this one asks whether it is still there.
    if (probe_) probe_->Answer();
    const double since = executing_since_.load();
    double waited = since > 0 ? CoarseRuntimeClock() - since : 0;
    if (since != asked_for) unreachable = 0;
    if (since > 0 && since != asked_for && waited > ask_at) {
      who = DescribeUnreachable(&unreachable);
      asked_for = since;
      // Asking took time; the collective may have finished meanwhile.
      if (executing_since_.load() != since) {
        unreachable = 0;
      } else {
        waited = CoarseRuntimeClock() - since;
      }
    }
    if (report_backend_wait_) report_backend_wait_(waited, unreachable);
    const bool stuck = since > 0 && executing_since_.load() == since;
    const bool shutdown = stuck && limit > 0 && waited > limit;
    const bool warn =
        stuck && check > 0 && waited > check && since != warned_for;
    if (shutdown || warn) {
      const std::size_t n = executing_count_.load();
      std::string m =
          "[hvdtune rank " + std::to_string(mpi_.rank) + "] " +
          (shutdown ? "ERROR" : "WARNING") + ": the collective of '" + first +
          "'" + (n > 1 ? " (and " + std::to_string(n - 1) + " more)" : "") +
          " has waited " + std::to_string(static_cast<int>(waited)) +
          " s inside MPI for the other ranks; " + who;
      if (shutdown) {
        m += "; a transfer in progress cannot be abandoned: ending the job "
             "(HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" +
             WatchdogSeconds(limit) + ")";
      } else {
        m += " (HOROVOD_STALL_CHECK_TIME_SECONDS=" + WatchdogSeconds(check) +
             "; HOROVOD_STALL_SHUTDOWN_TIME_SECONDS ends such a job)";
      }
      std::cerr << m + "\n" << std::flush;
      if (shutdown) MPI_Abort(MPI_COMM_WORLD, 1);
      warned_for = since;
    }
    lock.lock();
  }
}

std::string RuntimeImpl::DescribeUnreachable(int* unreachable) {
  if (!probe_) {
    return "which ranks are gone is not known (MPI was initialised without "
           "MPI_THREAD_MULTIPLE)";
  }
  // Ranks that are there answer within one turn of their watchdog (0.25 s)
  // on an idle link; a link busy with the stuck collective's data or a
  // loaded machine may take longer.
  constexpr double kAnswerSeconds = 2.0;
  const std::vector<int> missing = probe_->Unanswered(kAnswerSeconds);
  *unreachable = static_cast<int>(missing.size());
  if (missing.empty()) {
    return "every rank answered within " + WatchdogSeconds(kAnswerSeconds) +
           " s, so they are all reachable and one of them is slow or stuck "
           "elsewhere (a cycle moving more data than the link carries in "
           "this time?)";
  }
  return "no answer within " + WatchdogSeconds(kAnswerSeconds) + " s from " +
         probe_->Describe(missing) +
         ": stopped, dead, or cut off from this rank by the network";
}

TensorEntry* RuntimeImpl::StandIn(const Response& r, std::size_t i) {
  if (stand_ins_.size() <= i) {
    stand_ins_.push_back(std::make_unique<TensorEntry>());
  }
  TensorEntry& e = *stand_ins_[i];
  Request& q = e.request;
  q.name = r.name;
  q.type = r.type;
  q.dtype = r.dtype;
  q.op = r.op;
  q.root = r.root;
  q.shape = r.shape;
  q.group = r.group;
  q.group_size = r.group_size;
  q.device = false;
  q.id = kNoTensorId;
  const std::int64_t n = q.NumElements();
  e.bytes = n * static_cast<std::int64_t>(DataTypeSize(q.dtype));
  e.scratch.resize(static_cast<std::size_t>(2 * e.bytes));
  FillNeutral(e.scratch.data(), n, q.dtype,
              q.op == ReduceOp::kAverage ? ReduceOp::kSum : q.op);
  e.input = e.scratch.data();
  e.output = e.scratch.data() + e.bytes;
  e.handle.reset();
  e.part = 0;
  e.enqueued = e.negotiated = RuntimeClock();
  return &e;
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
  for (const auto& e : out.store_lookups)
    bus_.Emit(EventKind::kStoreLookup, &EventSink::OnStoreLookup, e);
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
  if (e.request.id == kNoTensorId) return;  // a stand-in: nobody waits
  if (bus_.wants(EventKind::kTensor)) {
    TensorEvent t;
    t.name = e.request.name;
    t.op = e.request.type;
    t.dtype = e.request.dtype;
    t.bytes = e.bytes;
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
  finished_.push_back({e.request.id, std::move(s)});
}

void RuntimeImpl::CompleteFinished() {
  if (finished_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Finished& f : finished_) {
      busy_[f.id] = 0;
      if (f.status.ok()) ++stats_.tensors_completed;
    }
    busy_count_ -= finished_.size();
  }
  // Every handle is marked done before any waiter is woken, once, and only
  // if a thread sleeps on one of them.
  bool wake = false;
  for (Finished& f : finished_) {
    // The entry keeps its name and shape buffers for reuse (RunCycle).
    std::shared_ptr<HandleState> handle = std::move(slots_[f.id]->handle);
    if (handle->Finish(std::move(f.status))) wake = true;
  }
  finished_.clear();
  if (wake) handle_pool_.completion().NotifyAll();
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
  boost_->Apply(cycle_knobs_.cycle_thread_boost(), /*warn=*/mpi_.rank == 0);
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
  std::vector<std::unique_ptr<TensorEntry>> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    timeline_cv_.notify_all();
    queued.swap(queue_);
    queued.resize(queue_size_);
    queue_size_ = 0;
    std::fill(busy_.begin(), busy_.end(), 0);
    busy_count_ = 0;
  }
  for (std::unique_ptr<TensorEntry>& e : slots_) {
    if (e && e->handle) e->handle->Complete(s);
  }
  slots_.clear();
  for (std::unique_ptr<TensorEntry>& e : queued) e->handle->Complete(s);
}

}  // namespace hvdtune::internal
