#include "hvdtune/metrics/metrics_sink.h"

#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <iostream>
#include <sstream>

#include "families.h"

namespace hvdtune::metrics {

struct MetricsSink::State {
  std::shared_ptr<prometheus::Registry> registry =
      std::make_shared<prometheus::Registry>();
  std::unique_ptr<internal::Families> f;
  std::unique_ptr<prometheus::Exposer> exposer;
  int port = 0;
  int rank = 0;
  // The throughput window (runtime clock).
  double window_start = -1;
  std::int64_t window_bytes = 0;
};

MetricsSink::MetricsSink(MetricsOptions options)
    : options_(std::move(options)), state_(std::make_unique<State>()) {}

MetricsSink::~MetricsSink() = default;

void MetricsSink::OnStart(const RuntimeInfo& info) {
  State& s = *state_;
  s.rank = info.rank;
  s.f = std::make_unique<internal::Families>(*s.registry, info);
  if (options_.base_port < 0) return;
  const int port =
      options_.base_port == 0 ? 0 : options_.base_port + info.local_rank;
  const bool v6 = options_.bind_address.find(':') != std::string::npos;
  const std::string address =
      v6 ? "[" + options_.bind_address + "]" : options_.bind_address;
  try {
    s.exposer = std::make_unique<prometheus::Exposer>(
        address + ":" + std::to_string(port), 1);
    s.exposer->RegisterCollectable(s.registry);
    const std::vector<int> ports = s.exposer->GetListeningPorts();
    s.port = ports.empty() ? 0 : ports.front();
    // One write per line: ranks share the terminal.
    std::cerr << ("[hvdtune rank " + std::to_string(info.rank) +
                  "] metrics at " + endpoint() + "\n")
              << std::flush;
  } catch (const std::exception& e) {
    s.exposer.reset();
    std::cerr << ("[hvdtune rank " + std::to_string(info.rank) +
                  "] warning: no metrics endpoint: cannot listen on " +
                  address + ":" + std::to_string(port) + " (" + e.what() +
                  "; HOROVOD_METRICS_PORT); the job goes on without it\n")
              << std::flush;
  }
}

void MetricsSink::OnCycle(const CycleEvent& e) {
  State& s = *state_;
  internal::Families& f = *s.f;
  f.cycles->Increment();
  const double end = e.start + e.seconds;
  if (s.window_start < 0) s.window_start = e.start;
  s.window_bytes += e.bytes;
  if (end - s.window_start >= 1.0) {
    f.throughput->Set(static_cast<double>(s.window_bytes) /
                      (end - s.window_start));
    s.window_start = end;
    s.window_bytes = 0;
  }
  if (e.tensors == 0 && e.cache_hits == 0 && e.cache_misses == 0) return;
  f.active_cycles->Increment();
  f.cycle_duration->Observe(e.seconds);
  f.negotiation_duration->Observe(e.negotiation_seconds);
  f.cycle_tensors->Observe(e.tensors);
  if (e.cache_hits) f.cache_hits->Increment(e.cache_hits);
  if (e.cache_misses) f.cache_misses->Increment(e.cache_misses);
  if (e.fused_bytes > 0) {
    f.fused_bytes->Increment(static_cast<double>(e.fused_bytes));
    if (e.fusion_threshold > 0) {
      const double fill = static_cast<double>(e.fused_bytes) /
                          static_cast<double>(e.fusion_threshold);
      f.fusion_fill->Set(fill > 1 ? 1 : fill);
    }
  }
}

void MetricsSink::OnCollective(const CollectiveEvent& e) {
  internal::Families& f = *state_->f;
  internal::AlgorithmChildren& a = f.Algorithm(e.op, e.algorithm);
  a.bytes->Increment(static_cast<double>(e.bytes));
  a.operations->Increment();
  f.collective_latency[static_cast<int>(e.op)]->Observe(e.seconds);
}

void MetricsSink::OnTensor(const TensorEvent& e) {
  internal::Families& f = *state_->f;
  const auto o = static_cast<int>(e.op);
  const auto d = static_cast<int>(e.dtype);
  f.tensors[o][d]->Increment();
  f.tensor_bytes[o][d]->Increment(static_cast<double>(e.bytes));
}

void MetricsSink::OnKnobsApplied(const KnobsAppliedEvent& e) {
  internal::Families& f = *state_->f;
  f.knob_changes->Increment();
  internal::SetKnobs(f, e.values);
}

void MetricsSink::OnAutotuneSample(const AutotuneSampleEvent& e) {
  internal::Families& f = *state_->f;
  f.samples->Increment();
  f.last_score->Set(e.score);
  f.best_score->Set(e.best_score);
  if (e.phase == AutotunePhase::kWarmup) f.initial_score->Set(e.score);
}

void MetricsSink::OnPhaseChange(const PhaseChangeEvent& e) {
  internal::Families& f = *state_->f;
  for (int p = 0; p < internal::kNumPhases; ++p) {
    f.phase[p]->Set(p == static_cast<int>(e.to) ? 1 : 0);
  }
  if (e.to == AutotunePhase::kRetuning) f.retunes->Increment();
  if (e.to == AutotunePhase::kFrozen && e.reference_score > 0) {
    f.initial_score->Set(e.reference_score);
  }
  if (e.to == AutotunePhase::kFrozen) {
    // NaN where there is no estimate (a confirmed stored best has no
    // initial one): a gauge that says "unknown" rather than a stale value.
    auto set = [](const std::array<prometheus::Gauge*, 3>& g,
                  const ScoreEstimate& v) {
      g[0]->Set(v.mean);
      g[1]->Set(v.low);
      g[2]->Set(v.high);
    };
    set(f.frozen_estimate, e.estimate);
    set(f.initial_estimate, e.reference);
    set(f.gain_estimate, e.gain);
  }
}

void MetricsSink::OnError(const ErrorEvent& e) {
  state_->f->errors[static_cast<int>(e.kind)]->Increment();
}

void MetricsSink::OnStall(const StallEvent& e) {
  internal::Families& f = *state_->f;
  (e.shutdown ? f.stall_shutdowns : f.stall_warnings)->Increment();
}

void MetricsSink::OnStoreLookup(const StoreLookupEvent& e) {
  state_->f->store_lookups[static_cast<int>(e.result)]->Increment();
}

void MetricsSink::CountStoreWrites(std::string_view result, std::uint64_t n) {
  internal::Families* f = state_->f.get();
  if (f == nullptr) return;
  const int i = result == "written" ? 0 : result == "dropped" ? 1 : 2;
  f->store_writes[i]->Increment(static_cast<double>(n));
}

void MetricsSink::SetBackendWait(double waited_seconds, int unreachable_ranks) {
  internal::Families* f = state_->f.get();
  if (f == nullptr) return;
  f->backend_wait->Set(waited_seconds);
  f->unreachable_ranks->Set(unreachable_ranks);
}

int MetricsSink::port() const { return state_->port; }

std::string MetricsSink::endpoint() const {
  if (!state_->exposer) return {};
  const bool v6 = options_.bind_address.find(':') != std::string::npos;
  return "http://" +
         (v6 ? "[" + options_.bind_address + "]" : options_.bind_address) +
         ":" + std::to_string(state_->port) + "/metrics";
}

std::string MetricsSink::Scrape() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, state_->registry->Collect());
  return out.str();
}

}  // namespace hvdtune::metrics
