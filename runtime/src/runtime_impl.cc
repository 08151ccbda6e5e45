#include "runtime_impl.h"

#include <cmath>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "backends/nccl/nccl_backend.h"
#include "fusion.h"
#include "reduce.h"

namespace hvdtune::internal {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// What every rank must agree on at init, exchanged before anything runs.
struct InitVote {
  std::int32_t ok = 1;
  std::int32_t ranks_per_node = 0;
  std::int32_t fusion_lookahead = 1;
  double knobs[kNumKnobs] = {};
};

void CheckKnobValues(const KnobSettings& values) {
  for (const KnobSpec& spec : KnobTable()) {
    const double v = values.Get(spec.id);
    const bool integral = spec.type != KnobType::kFloat;
    const bool below = spec.type == KnobType::kFloat ? v <= spec.min_value
                                                     : v < spec.min_value;
    if (!std::isfinite(v) || below || v > spec.max_value ||
        (integral && v != std::floor(v))) {
      std::ostringstream os;
      os << "knob " << spec.name << " = " << v << " is outside its range ["
         << spec.min_value << ", " << spec.max_value << "]";
      throw ConfigError(os.str());
    }
  }
}

}  // namespace

RuntimeSettings ParseRuntimeSettings(const EnvLookup& env) {
  RuntimeSettings s;
  s.knobs = ParseKnobsFromEnv(env);
  if (auto v = env("HVDTUNE_RANKS_PER_NODE")) {
    s.ranks_per_node = static_cast<int>(
        ParseIntSetting("HVDTUNE_RANKS_PER_NODE", *v, 1, 1 << 20));
  }
  s.autotune = ParseAutotuneSettings(env);
  if (auto v = env("HVDTUNE_FUSION_LOOKAHEAD")) {
    s.fusion_lookahead = ParseBoolSetting("HVDTUNE_FUSION_LOOKAHEAD", *v);
  }
  return s;
}

RuntimeImpl::RuntimeImpl(const RuntimeOptions& options) {
  const EnvLookup env = options.env ? options.env : ProcessEnv();
  std::string config_error;
  try {
    settings_ = ParseRuntimeSettings(env);
  } catch (const ConfigError& e) {
    config_error = e.what();
  }
  mpi_ = MpiContext::Create(settings_.ranks_per_node);

  // A setting that differs between ranks would make them plan different
  // fusions and deadlock: every rank checks the others' view first.
  InitVote mine;
  mine.ok = config_error.empty() ? 1 : 0;
  mine.ranks_per_node = settings_.ranks_per_node;
  mine.fusion_lookahead = settings_.fusion_lookahead ? 1 : 0;
  for (int k = 0; k < kNumKnobs; ++k) {
    mine.knobs[k] = settings_.knobs.values.Get(static_cast<KnobId>(k));
  }
  std::vector<InitVote> votes(static_cast<std::size_t>(mpi_.size));
  const int rc = MPI_Allgather(&mine, sizeof(InitVote), MPI_BYTE, votes.data(),
                               sizeof(InitVote), MPI_BYTE, mpi_.control);
  if (rc != MPI_SUCCESS) {
    mpi_.Free();
    throw ConfigError(MpiError("MPI_Allgather (init)", rc).message());
  }
  for (int r = 0; r < mpi_.size && config_error.empty(); ++r) {
    const InitVote& v = votes[static_cast<std::size_t>(r)];
    if (!v.ok) {
      config_error = "rank " + std::to_string(r) +
                     " rejected its configuration (see its error)";
      break;
    }
    if (v.ranks_per_node != votes[0].ranks_per_node) {
      config_error = "HVDTUNE_RANKS_PER_NODE differs between rank 0 and rank " +
                     std::to_string(r);
      break;
    }
    if (v.fusion_lookahead != votes[0].fusion_lookahead) {
      config_error =
          "HVDTUNE_FUSION_LOOKAHEAD differs between rank 0 and rank " +
          std::to_string(r);
      break;
    }
    for (const KnobSpec& spec : KnobTable()) {
      const int k = static_cast<int>(spec.id);
      if (v.knobs[k] != votes[0].knobs[k]) {
        std::ostringstream os;
        os << std::string(spec.env) << " differs between ranks: rank 0 has "
           << votes[0].knobs[k] << ", rank " << r << " has " << v.knobs[k]
           << " (every rank must use the same value)";
        config_error = os.str();
        break;
      }
    }
  }
  if (!config_error.empty()) {
    mpi_.Free();
    throw ConfigError(config_error);
  }

  knobs_ = settings_.knobs.values;
  cycle_knobs_ = knobs_;
  types_ = std::make_unique<MpiTypes>();
  backend_ = std::make_unique<MpiBackend>(mpi_.data, *types_);
  algorithms_ = MakeAllreduceAlgorithms();
  // Collective: every rank gets the NCCL backend or none does.
  nccl_ = MakeNcclBackend(mpi_, &nccl_unavailable_);
  check_device_pointers_ = nccl_ != nullptr || HaveCudaDevice();
  controller_ = std::make_unique<Controller>(
      mpi_, static_cast<std::size_t>(knobs_.cache_capacity()));
  if (settings_.autotune.enabled && mpi_.rank == 0) {
    try {
      TuningScope scope;
      scope.pinned = settings_.knobs.pinned;
      scope.multi_node = mpi_.cross_size > 1;
      scope.tune_num_groups = options.tune_num_groups;
      tuner_ =
          std::make_unique<ParameterManager>(settings_.autotune, scope, knobs_);
      meter_ = std::make_unique<ThroughputMeter>();
      autotune_status_ = tuner_->status();
    } catch (const std::exception& e) {
      std::cerr << "[hvdtune rank 0] WARNING: autotuning disabled, the tuner "
                   "failed to start: "
                << e.what() << std::endl;
      tuner_.reset();
    }
  }
  running_ = true;
  thread_ = std::thread(&RuntimeImpl::Loop, this);
}

RuntimeImpl::~RuntimeImpl() { Shutdown(); }

void RuntimeImpl::Shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  shutdown_requested_ = true;
  if (thread_.joinable()) thread_.join();
  controller_.reset();
  nccl_.reset();
  backend_.reset();
  types_.reset();
  mpi_.Free();
}

Handle RuntimeImpl::Enqueue(std::vector<TensorEntry> entries) {
  auto state = std::make_shared<HandleState>();
  Handle handle(state);
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_) {
    state->Complete(Status::Aborted("hvdtune runtime is shut down"));
    return handle;
  }
  for (TensorEntry& e : entries) {
    e.request.device = check_device_pointers_ &&
                       (IsDevicePointer(e.input) || IsDevicePointer(e.output));
    if (e.request.device && !nccl_) {
      state->Complete(Status::InvalidArgument(
          "tensor '" + e.request.name +
          "' is in device memory but there is no NCCL backend: " +
          nccl_unavailable_.message()));
      return handle;
    }
    if (names_in_flight_.count(e.request.name)) {
      state->Complete(
          Status::InvalidArgument("a collective named '" + e.request.name +
                                  "' is already in flight on this rank"));
      return handle;
    }
  }
  state->parts_left = static_cast<int>(entries.size());
  for (TensorEntry& e : entries) {
    names_in_flight_.insert(e.request.name);
    e.handle = state;
    queue_.push_back(std::move(e));
  }
  return handle;
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
  if (mpi_.rank != 0) {
    throw std::logic_error("knob updates are requested on rank 0 only");
  }
  CheckKnobValues(values);
  std::lock_guard<std::mutex> lock(mu_);
  return QueueKnobUpdateLocked(values);
}

std::uint64_t RuntimeImpl::QueueKnobUpdateLocked(const KnobSettings& values) {
  const std::uint64_t version =
      std::max(next_update_version_, knob_version_) + 1;
  next_update_version_ = version;
  Writer w;
  w.I64(static_cast<std::int64_t>(version));
  w.I32(kNumKnobs);
  for (int k = 0; k < kNumKnobs; ++k) {
    w.F64(values.Get(static_cast<KnobId>(k)));
  }
  pending_update_ = std::move(w.bytes());
  return version;
}

double RuntimeImpl::Now() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

void RuntimeImpl::MarkStep() {
  std::lock_guard<std::mutex> lock(mu_);
  if (tuner_) step_marks_.push_back(Now());
}

AutotuneStatus RuntimeImpl::autotune_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return autotune_status_;
}

void RuntimeImpl::Autotune() {
  const auto start = Clock::now();
  std::vector<double> marks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    marks.swap(step_marks_);
  }
  // Completions and the application's step marks, in time order.
  std::size_t m = 0;
  for (const Completion& c : completed_) {
    for (; m < marks.size() && marks[m] <= c.time; ++m) {
      meter_->MarkStep(marks[m]);
    }
    meter_->OnTensorDone(c.name, c.bytes, c.time);
  }
  for (; m < marks.size(); ++m) meter_->MarkStep(marks[m]);
  completed_.clear();
  try {
    for (const ThroughputMeter::Step& step : meter_->TakeSteps()) {
      std::optional<KnobSettings> next =
          tuner_->OnStep(step.bytes, step.seconds, step.end_time);
      if (next) {
        CheckKnobValues(*next);
        std::lock_guard<std::mutex> lock(mu_);
        QueueKnobUpdateLocked(*next);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    autotune_status_ = tuner_->status();
    stats_.autotune_seconds += Seconds(Clock::now() - start);
  } catch (const std::exception& e) {
    // The job goes on with the knobs in force; only tuning stops.
    std::cerr << "[hvdtune rank 0] WARNING: autotuning stopped after an "
                 "error in the tuner: "
              << e.what() << "; continuing with " << cycle_knobs_.ToString()
              << std::endl;
    tuner_.reset();
    meter_.reset();
    std::lock_guard<std::mutex> lock(mu_);
    autotune_status_.phase = AutotunePhase::kOff;
  }
}

RuntimeStats RuntimeImpl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  RuntimeStats s = stats_;
  s.knob_version = knob_version_;
  return s;
}

void RuntimeImpl::Loop() {
  bool stop = false;
  while (!stop) {
    const auto start = Clock::now();
    RunCycle(&stop);
    if (stop) break;
    const auto period = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(
            cycle_knobs_.cycle_time_ms()));
    std::this_thread::sleep_until(start + period);
  }
  FailEverything(Status::Aborted("hvdtune runtime is shut down"));
}

void RuntimeImpl::RunCycle(bool* stop) {
  std::vector<Request> requests;
  std::optional<std::vector<std::uint8_t>> update;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  const auto t0 = Clock::now();
  Controller::CycleResult result =
      controller_->RunCycle(std::move(requests), shutdown_requested_.load(),
                            update ? &*update : nullptr);
  const double negotiation = Seconds(Clock::now() - t0);
  if (!result.status.ok()) {
    std::cerr << "[hvdtune rank " << mpi_.rank
              << "] negotiation failed, stopping: " << result.status.ToString()
              << std::endl;
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
  Execute(result.ready);
  if (result.knob_update) ApplyKnobUpdate(*result.knob_update);
  if (tuner_) Autotune();
  if (result.shutdown) *stop = true;
}

void RuntimeImpl::Execute(const std::vector<Response>& ready) {
  if (ready.empty()) return;
  std::vector<TensorEntry*> entries;
  std::vector<FusionItem> items;
  entries.reserve(ready.size());
  items.reserve(ready.size());
  for (const Response& r : ready) {
    TensorEntry& e = in_flight_.at(r.name);
    entries.push_back(&e);
    items.push_back({r.type, r.dtype, r.op,
                     e.request.NumElements() *
                         static_cast<std::int64_t>(DataTypeSize(r.dtype)),
                     r.kind == Response::Kind::kError, r.device});
  }
  const auto groups = PlanFusion(items, cycle_knobs_.fusion_threshold_bytes(),
                                 settings_.fusion_lookahead);
  for (const FusionGroup& g : groups) {
    const std::size_t first = g.members.front();
    const Response& r = ready[first];
    TensorEntry& e = *entries[first];
    if (r.kind == Response::Kind::kError) {
      Finish(e, Status::Mismatch(r.error));
    } else if (r.type == CollectiveType::kBroadcast) {
      ExecuteBroadcast(e);
    } else if (r.type == CollectiveType::kAllgather) {
      ExecuteAllgather(e, r);
    } else {
      std::vector<TensorEntry*> group;
      group.reserve(g.members.size());
      for (std::size_t i : g.members) group.push_back(entries[i]);
      ExecuteAllreduce(group);
    }
  }
}

void RuntimeImpl::ExecuteAllreduce(const std::vector<TensorEntry*>& group) {
  const Request& head = group.front()->request;
  const DataType dtype = head.dtype;
  const ReduceOp op = head.op;
  const std::size_t esize = DataTypeSize(dtype);
  const AlgorithmContext ctx{*backend_, mpi_, *types_, cycle_knobs_};
  AllreduceAlgorithm& algorithm = *algorithms_.at(
      static_cast<std::size_t>(cycle_knobs_.allreduce_algorithm()));
  if (head.device) {
    ExecuteDeviceAllreduce(group);
    return;
  }
  const ReduceOp wire_op = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  std::int64_t total = 0;
  for (const TensorEntry* e : group) total += e->request.NumElements();
  // The group's concatenation is processed in chunks: copy in, reduce,
  // divide, copy out, chunk by chunk, so each chunk is still in cache for
  // the next pass and the fusion buffer needs one chunk only.
  const std::int64_t chunk_bytes = cycle_knobs_.pipeline_chunk_bytes();
  const std::int64_t chunk =
      chunk_bytes > 0 ? std::max<std::int64_t>(
                            1, chunk_bytes / static_cast<std::int64_t>(esize))
                      : std::max<std::int64_t>(1, total);
  Status s;
  if (group.size() == 1) {
    TensorEntry& e = *group.front();
    const auto* in = static_cast<const char*>(e.input);
    auto* out = static_cast<char*>(e.output);
    for (std::int64_t done = 0; done < total && s.ok(); done += chunk) {
      const std::int64_t n = std::min(chunk, total - done);
      const std::size_t at = static_cast<std::size_t>(done) * esize;
      s = algorithm.Run(ctx, in + at, out + at, n, dtype, wire_op);
      if (s.ok() && op == ReduceOp::kAverage) {
        DivideBy(out + at, n, dtype, mpi_.size);
      }
    }
  } else {
    const std::int64_t buffer_elems =
        std::min(chunk, std::max<std::int64_t>(total, 1));
    const std::size_t buffer_bytes =
        static_cast<std::size_t>(buffer_elems) * esize;
    if (fusion_buffer_.size() < buffer_bytes)
      fusion_buffer_.resize(buffer_bytes);
    // Cursors (tensor index, byte offset in it) for copying in and out.
    std::size_t in_t = 0, in_off = 0, out_t = 0, out_off = 0;
    // Member sizes, computed once: the cursors below consult them per piece.
    std::vector<std::size_t> member_bytes(group.size());
    for (std::size_t t = 0; t < group.size(); ++t) {
      member_bytes[t] =
          static_cast<std::size_t>(group[t]->request.NumElements()) * esize;
    }
    auto tensor_bytes = [&](std::size_t t) { return member_bytes[t]; };
    for (std::int64_t done = 0; done < total && s.ok(); done += chunk) {
      const std::int64_t n = std::min(chunk, total - done);
      const std::size_t bytes = static_cast<std::size_t>(n) * esize;
      for (std::size_t filled = 0; filled < bytes;) {
        const std::size_t take =
            std::min(bytes - filled, tensor_bytes(in_t) - in_off);
        if (take > 0) {  // a zero-element member may have a null buffer
          std::memcpy(fusion_buffer_.data() + filled,
                      static_cast<const char*>(group[in_t]->input) + in_off,
                      take);
        }
        filled += take;
        in_off += take;
        if (in_off == tensor_bytes(in_t)) ++in_t, in_off = 0;
        while (in_t < group.size() && tensor_bytes(in_t) == 0) ++in_t;
      }
      s = algorithm.Run(ctx, fusion_buffer_.data(), fusion_buffer_.data(), n,
                        dtype, wire_op);
      if (!s.ok()) break;
      if (op == ReduceOp::kAverage) {
        DivideBy(fusion_buffer_.data(), n, dtype, mpi_.size);
      }
      for (std::size_t drained = 0; drained < bytes;) {
        while (tensor_bytes(out_t) == 0) ++out_t;
        const std::size_t take =
            std::min(bytes - drained, tensor_bytes(out_t) - out_off);
        std::memcpy(static_cast<char*>(group[out_t]->output) + out_off,
                    fusion_buffer_.data() + drained, take);
        drained += take;
        out_off += take;
        if (out_off == tensor_bytes(out_t)) ++out_t, out_off = 0;
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.collective_calls;
    if (s.ok())
      stats_.bytes_allreduced += static_cast<std::uint64_t>(total) * esize;
  }
  for (TensorEntry* e : group) Finish(*e, s);
}

void RuntimeImpl::ExecuteDeviceAllreduce(
    const std::vector<TensorEntry*>& group) {
  // Device tensors are never fused (no host staging): each one is reduced by
  // NCCL in place, with the average done by NCCL as well.
  const bool hierarchical =
      cycle_knobs_.allreduce_algorithm_name() == "hierarchical";
  for (TensorEntry* e : group) {
    const std::int64_t n = e->request.NumElements();
    const DataType dtype = e->request.dtype;
    Status s;
    if (n > 0) {
      s = hierarchical
              ? NcclHierarchicalAllreduce(*nccl_, mpi_, *types_, e->input,
                                          e->output, n, dtype, e->request.op)
              : nccl_->Allreduce(e->input, e->output, n, dtype, e->request.op);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.collective_calls;
      if (s.ok()) {
        stats_.bytes_allreduced +=
            static_cast<std::uint64_t>(n) * DataTypeSize(dtype);
      }
    }
    Finish(*e, s);
  }
}

void RuntimeImpl::ExecuteBroadcast(TensorEntry& e) {
  const std::int64_t bytes =
      e.request.NumElements() *
      static_cast<std::int64_t>(DataTypeSize(e.request.dtype));
  Status s;
  if (bytes > 0) {
    Backend& b = e.request.device ? *nccl_ : *backend_;
    s = b.Broadcast(e.output, bytes, e.request.root);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.collective_calls;
  }
  Finish(e, s);
}

void RuntimeImpl::ExecuteAllgather(TensorEntry& e, const Response& resp) {
  std::int64_t row = static_cast<std::int64_t>(DataTypeSize(e.request.dtype));
  for (std::size_t d = 1; d < e.request.shape.size(); ++d) {
    row *= e.request.shape[d];
  }
  std::vector<std::int64_t> bytes_per_rank;
  std::int64_t rows = 0;
  for (std::int64_t dim : resp.first_dims) {
    bytes_per_rank.push_back(dim * row);
    rows += dim;
  }
  HandleState& h = *e.handle;
  h.output.assign(static_cast<std::size_t>(rows * row), 0);
  h.output_shape = e.request.shape;
  h.output_shape[0] = rows;
  Status s;
  if (rows * row > 0) {
    Backend& b = e.request.device ? *nccl_ : *backend_;
    if (!e.request.device && cycle_knobs_.hierarchical_allgather()) {
      const AlgorithmContext ctx{*backend_, mpi_, *types_, cycle_knobs_};
      s = hierarchical_allgather_.Run(ctx, e.input, e.request.shape[0] * row,
                                      h.output.data(), bytes_per_rank);
    } else {
      s = b.Allgatherv(e.input, e.request.shape[0] * row, h.output.data(),
                       bytes_per_rank);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.collective_calls;
  }
  Finish(e, s);
}

void RuntimeImpl::ApplyKnobUpdate(const std::vector<std::uint8_t>& bytes) {
  KnobSettings next = cycle_knobs_;
  std::uint64_t version = 0;
  try {
    Reader rd(bytes.data(), bytes.size());
    version = static_cast<std::uint64_t>(rd.I64());
    if (rd.I32() != kNumKnobs) throw std::runtime_error("knob count");
    for (int k = 0; k < kNumKnobs; ++k)
      next.Set(static_cast<KnobId>(k), rd.F64());
    CheckKnobValues(next);
  } catch (const std::exception& e) {
    // Every rank received the same bytes, so every rank skips the update.
    std::cerr << "[hvdtune rank " << mpi_.rank
              << "] ignoring a malformed knob update: " << e.what()
              << std::endl;
    return;
  }
  if (next.cache_capacity() != cycle_knobs_.cache_capacity()) {
    controller_->ResizeCache(static_cast<std::size_t>(next.cache_capacity()));
  }
  cycle_knobs_ = next;
  std::lock_guard<std::mutex> lock(mu_);
  knobs_ = next;
  knob_version_ = version;
  stats_.knob_update_cycle = stats_.cycles;
}

void RuntimeImpl::Finish(TensorEntry& e, Status s) {
  if (meter_ && s.ok()) {
    // Handed to the meter after the cycle, under the autotune timer.
    completed_.push_back(
        {e.request.name,
         static_cast<double>(e.request.NumElements()) *
             static_cast<double>(DataTypeSize(e.request.dtype)),
         Now()});
  }
  std::shared_ptr<HandleState> handle = std::move(e.handle);
  const std::string name = e.request.name;
  in_flight_.erase(name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    names_in_flight_.erase(name);
    if (s.ok()) ++stats_.tensors_completed;
  }
  handle->Complete(std::move(s));
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
