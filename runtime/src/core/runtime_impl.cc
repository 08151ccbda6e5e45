#include "core/runtime_impl.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "core/backends/nccl/nccl_backend.h"
#include "core/init_agreement.h"

namespace hvdtune::internal {

double CoarseRuntimeClock() {
#ifdef CLOCK_MONOTONIC_COARSE
  // steady_clock is CLOCK_MONOTONIC: the same clock, a tick behind at most.
  timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0) {
    return static_cast<double>(ts.tv_sec) +
           1e-9 * static_cast<double>(ts.tv_nsec);
  }
#endif
  return RuntimeClock();
}

RuntimeImpl::RuntimeImpl(RuntimeConfig config, Services services,
                         std::string config_error)
    : config_(std::move(config)) {
  engine_ = MakeEngine(config_);
  engine_kind_ = engine_->kind();
  // Before the node split: HVDTUNE_RANKS_PER_NODE decides which collective
  // that is, so the ranks must agree on it first. (A throw here frees the
  // engine: nothing is left posted at set-up.)
  AgreeOnConfig(engine_->control(), config_, config_error);
  engine_->SplitNodes(config_.settings.ranks_per_node);
  world_ = engine_->world();
  // Measured (docs/benchmarks.md): with a hardware thread per rank, gathering
  // a burst halves the cycles and the negotiation time of a many-tensor
  // step; with more ranks than hardware threads an application thread is
  // often descheduled in the middle of its burst, and waiting for it costs
  // more than negotiating what has arrived.
  gather_arrivals_ = static_cast<unsigned>(engine_->RanksOnThisMachine()) <=
                     std::thread::hardware_concurrency();
  // Collective: every rank gets the NCCL backend or none does.
  nccl_ = engine_->MakeDeviceBackend(&nccl_unavailable_);
  check_device_pointers_ = nccl_ != nullptr || HaveCudaDevice();
  // Collective, like the NCCL backend: the same start on every rank.
  const int algorithm = static_cast<int>(KnobId::kAllreduceAlgorithm);
  if (!config_.knobs.pinned[algorithm]) {
    const KnobSpec& spec = GetKnobSpec(KnobId::kAllreduceAlgorithm);
    config_.knobs.values.Set(
        spec.id, ParseKnobValue(spec, TopologyAllreduceAlgorithm(
                                          engine_->control(), world_,
                                          engine_->kind(), nccl_ != nullptr)));
  }
  knobs_ = config_.knobs.values;
  cycle_knobs_ = knobs_;
  controller_ = std::make_unique<Controller>(
      world_, engine_->control(),
      static_cast<std::size_t>(knobs_.cache_capacity()),
      StallSettings{config_.settings.stall_check_seconds,
                    config_.settings.stall_shutdown_seconds});
  executor_ = std::make_unique<Executor>(*engine_, nccl_.get());
  for (auto& sink : services.sinks) bus_.Attach(std::move(sink));
  make_timeline_ = std::move(services.make_timeline);
  if (!config_.telemetry.timeline_path.empty() && make_timeline_) {
    try {
      timeline_ = make_timeline_(config_.telemetry.timeline_path,
                                 config_.telemetry.timeline_mark_cycles);
      bus_.Attach(timeline_);
    } catch (const std::exception& e) {
      std::cerr << "[hvdtune rank " << world_.rank
                << "] WARNING: no timeline: " << e.what() << std::endl;
    }
  }
  if (config_.autotune.enabled && world_.rank == 0) StartAutotuner(services);
  info_ = Info();
  const RuntimeInfo& info = info_;
  bus_.Start(info);
  precise_enqueue_times_ = bus_.wants(EventKind::kTensor);
  const bool watch = config_.settings.stall_check_seconds > 0 ||
                     config_.settings.stall_shutdown_seconds > 0;
  if (watch) {
    report_backend_wait_ = std::move(services.report_backend_wait);
    // Collective, so before the cycle thread starts; the ranks agreed on
    // the stall settings (AgreeOnConfig).
    probe_ = engine_->MakeRankProbe();
  }
  running_ = true;
  thread_ = std::thread(&RuntimeImpl::Loop, this);
  if (watch) watchdog_ = std::thread(&RuntimeImpl::Watchdog, this);
}

RuntimeInfo RuntimeImpl::Info() const {
  const World& w = world_;
  RuntimeInfo info;
  info.rank = w.rank;
  info.size = w.size;
  info.local_rank = w.local_rank;
  info.local_size = w.local_size;
  info.cross_rank = w.cross_rank;
  info.cross_size = w.cross_size;
  info.knobs = knobs_;
  info.mpi_version = engine_->library_version();
  info.engine = engine_->kind();
  info.elastic = config_.gloo.elastic;
  return info;
}

void RuntimeImpl::StartAutotuner(const Services& services) {
  if (!services.make_autotuner) return;
  TuningContext ctx;
  ctx.info = Info();
  ctx.knobs = config_.knobs;
  ctx.settings = config_.autotune;
  ctx.tune_num_groups = config_.tune_num_groups;
  ctx.priority_raisable = CanRaiseThreadPriority(
      static_cast<int>(GetKnobSpec(KnobId::kCycleThreadBoost).tune_max));
  ctx.config_source = services.config_source;
  try {
    autotuner_ = services.make_autotuner(ctx);
  } catch (const std::exception& e) {
    std::cerr << "[hvdtune rank 0] WARNING: autotuning disabled, the tuner "
                 "failed to start: "
              << e.what() << std::endl;
  }
  if (autotuner_) bus_.Attach(autotuner_);
}

RuntimeImpl::~RuntimeImpl() { Shutdown(); }

void RuntimeImpl::Shutdown() {
  shut_down_locally_ = true;
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_requested_ = true;
  }
  work_cv_.notify_one();
  {
    std::lock_guard<std::mutex> lock(signal_.mu);
    signal_.cv.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  if (watchdog_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(watchdog_mu_);
      watchdog_stop_ = true;
    }
    watchdog_cv_.notify_one();
    watchdog_.join();
  }
  if (report_backend_wait_) report_backend_wait_(0, 0);
  bus_.Stop();
  if (controller_ && controller_->abandoned()) {
    // A negotiation allreduce is still posted on the control communicator
    // (given up on stopped ranks): its buffers and the communicators stay,
    // so that if those ranks ever resume, nothing is written to freed
    // memory.
    static_cast<void>(controller_.release());
    static_cast<void>(probe_.release());
    executor_.reset();
    nccl_.reset();
    static_cast<void>(engine_.release());
    return;
  }
  controller_.reset();
  probe_.reset();
  executor_.reset();
  nccl_.reset();
  engine_.reset();
}

namespace {

// Every field, since the entry is reused: the name and shape keep their
// buffers' capacity from earlier submissions.
void Fill(const EntrySpec& spec, TensorId id, bool device, double now,
          const std::shared_ptr<HandleState>& state, std::int32_t part,
          TensorEntry* e) {
  Request& r = e->request;
  r.name.assign(spec.name);
  r.type = spec.type;
  r.dtype = spec.dtype;
  r.op = spec.op;
  r.root = spec.root;
  r.rank = 0;
  r.shape.assign(spec.shape.begin(), spec.shape.end());
  r.group.assign(spec.group);
  r.group_size = spec.group_size;
  r.splits.assign(spec.splits.begin(), spec.splits.end());
  r.device = device;
  r.waited_seconds = 0;
  r.enqueued = now;
  r.id = id;
  e->bytes = r.NumElements() * static_cast<std::int64_t>(DataTypeSize(r.dtype));
  e->input = spec.input;
  e->output = spec.output;
  e->handle = state;
  e->part = part;
  e->enqueued = now;
  e->negotiated = 0;
}

}  // namespace

Handle RuntimeImpl::Enqueue(std::span<const EntrySpec> specs) {
  std::shared_ptr<HandleState> state = handle_pool_.Make();
  // Waits on the handle are news only to a cycle thread that gathers.
  if (gather_arrivals_) state->signal = &signal_;
  const double now =
      precise_enqueue_times_ ? RuntimeClock() : CoarseRuntimeClock();
  std::unique_lock<std::mutex> lock(mu_);
  if (!running_) {
    state->Complete(Status::Aborted(
        stop_reason_.ok()
            ? std::string("hvdtune runtime is shut down")
            : "hvdtune runtime stopped: " + stop_reason_.message()));
    return Handle(std::move(state));
  }
  const std::size_t first = queue_size_;
  if (queue_.size() < first + specs.size()) queue_.resize(first + specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const EntrySpec& spec = specs[i];
    // Made once per queue position or tensor id; reused from then on.
    if (!queue_[first + i]) queue_[first + i] = std::make_unique<TensorEntry>();
    const bool device =
        check_device_pointers_ &&
        (IsDevicePointer(spec.input) || IsDevicePointer(spec.output));
    queue_[first + i]->request.device = device;
    if (device && !nccl_) {
      state->Complete(Status::InvalidArgument(
          "tensor '" + std::string(spec.name) +
          "' is in device memory but there is no NCCL backend: " +
          nccl_unavailable_.message()));
      return Handle(std::move(state));
    }
  }
  // One hash of the name per submission; the cycle thread works with the
  // id. The entries are filled only once every name is known to be free.
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const EntrySpec& spec = specs[i];
    auto it = ids_.find(spec.name);
    if (it == ids_.end()) {
      it = ids_.emplace(std::string(spec.name),
                        static_cast<TensorId>(ids_.size()))
               .first;
      busy_.push_back(0);
    }
    const TensorId id = it->second;
    if (busy_[id]) {
      for (std::size_t j = 0; j < i; ++j) {
        busy_[queue_[first + j]->request.id] = 0;
      }
      state->Complete(Status::InvalidArgument(
          "a collective named '" + std::string(spec.name) +
          "' is already in flight on this rank"));
      return Handle(std::move(state));
    }
    busy_[id] = 1;  // also catches a name twice in one group
    queue_[first + i]->request.id = id;
  }
  state->parts_left = static_cast<int>(specs.size());
  const CollectiveType type =
      specs.empty() ? CollectiveType::kAllreduce : specs.front().type;
  if (type == CollectiveType::kAllgather ||
      type == CollectiveType::kReducescatter ||
      type == CollectiveType::kAlltoall) {
    state->outputs.resize(specs.size());
  }
  // Nothing of this rank queued or in flight: the cycle thread may be
  // sleeping out the rest of a cycle_time; wake it so a lone collective
  // does not wait for the timer (rank peers wake the same way, or are
  // already waiting in the negotiation).
  const bool wake = busy_count_ == 0 && !specs.empty();
  if (wake) {
    idle_arrival_ = true;
    arrival_waits_ = signal_.waits.load();
  }
  busy_count_ += specs.size();
  const std::uint64_t enqueued =
      enqueued_.fetch_add(specs.size(), std::memory_order_relaxed) +
      specs.size();
  if (wake) arrival_enqueued_ = enqueued;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    TensorEntry& e = *queue_[first + i];
    Fill(specs[i], e.request.id, e.request.device, now, state,
         static_cast<std::int32_t>(i), &e);
  }
  queue_size_ = first + specs.size();
  lock.unlock();
  if (wake) work_cv_.notify_one();
  return Handle(std::move(state));
}

KnobSettings RuntimeImpl::knobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return knobs_;
}

std::uint64_t RuntimeImpl::knob_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return knob_version_;
}

std::uint64_t RuntimeImpl::RequestKnobUpdate(const KnobSettings& values) {
  if (world_.rank != 0) {
    throw std::logic_error("knob updates are requested on rank 0 only");
  }
  CheckKnobValues(values);
  std::lock_guard<std::mutex> lock(mu_);
  return QueueKnobUpdateLocked(values);
}

std::uint64_t RuntimeImpl::QueueKnobUpdateLocked(const KnobSettings& values) {
  KnobUpdate update;
  update.version = std::max(next_update_version_, knob_version_) + 1;
  update.values = values;
  next_update_version_ = update.version;
  pending_update_ = Serialize(update);
  return update.version;
}

void RuntimeImpl::MarkStep() {
  if (autotuner_) autotuner_->MarkStep(RuntimeClock());
}

AutotuneStatus RuntimeImpl::autotune_status() const {
  return autotuner_ ? autotuner_->status() : AutotuneStatus{};
}

RuntimeStats RuntimeImpl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  RuntimeStats s = stats_;
  s.knob_version = knob_version_;
  return s;
}

Status RuntimeImpl::SwapTimeline(std::shared_ptr<EventSink> next,
                                 std::shared_ptr<EventSink>* previous) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!running_) {
    return Status::Aborted("hvdtune runtime is not running");
  }
  next_timeline_ = std::move(next);
  timeline_change_ = true;
  // Wake an idle cycle thread: the change applies at its next cycle.
  idle_arrival_ = true;
  work_cv_.notify_one();
  timeline_cv_.wait(lock, [&] { return !timeline_change_ || !running_; });
  if (timeline_change_) {
    // The loop stopped first: the bus stops every sink at shutdown.
    timeline_change_ = false;
    next_timeline_.reset();
    return Status::Aborted("hvdtune runtime stopped");
  }
  *previous = std::move(next_timeline_);  // the one swapped out
  return Status::Ok();
}

void RuntimeImpl::ApplyTimelineChange() {
  std::shared_ptr<EventSink> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!timeline_change_) return;
    next = std::move(next_timeline_);
  }
  std::shared_ptr<EventSink> previous = std::move(timeline_);
  if (previous) bus_.Remove(previous.get());
  if (next) bus_.Attach(next);
  timeline_ = std::move(next);
  precise_enqueue_times_ = bus_.wants(EventKind::kTensor);
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_timeline_ = std::move(previous);
    timeline_change_ = false;
  }
  timeline_cv_.notify_all();
}

Status RuntimeImpl::StartTimeline(const std::string& path, bool mark_cycles) {
  if (path.empty()) {
    return Status::InvalidArgument("timeline path must not be empty");
  }
  if (!make_timeline_) {
    return Status::InvalidArgument(
        "this runtime has no timeline module (built from Services without "
        "make_timeline; hvdtune::runtime's Runtime(RuntimeOptions) has one)");
  }
  std::lock_guard<std::mutex> one(timeline_mu_);
  std::shared_ptr<EventSink> sink;
  try {
    sink = make_timeline_(path, mark_cycles);
    sink->OnStart(info_);  // opens the file (rank 0)
  } catch (const std::exception& e) {
    return Status::InvalidArgument("cannot start the timeline '" + path +
                                   "': " + e.what());
  }
  std::shared_ptr<EventSink> previous;
  Status s = SwapTimeline(sink, &previous);
  if (!s.ok()) {
    sink->OnStop();
    return s;
  }
  if (previous) previous->OnStop();
  return Status::Ok();
}

Status RuntimeImpl::StopTimeline() {
  std::lock_guard<std::mutex> one(timeline_mu_);
  std::shared_ptr<EventSink> previous;
  const Status s = SwapTimeline(nullptr, &previous);
  // Stopped runtime: its sinks were (or will be) stopped by Shutdown.
  if (!s.ok()) return Status::Ok();
  if (previous) previous->OnStop();
  return Status::Ok();
}

}  // namespace hvdtune::internal
