// Prometheus metrics of one rank: an event sink that keeps prometheus-cpp
// counters, gauges and histograms, and (when a port is configured) an HTTP
// endpoint serving them at /metrics. Knows the runtime only through its
// public event stream (hvdtune/events.h) and knob table (hvdtune/knobs.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "hvdtune/events.h"

namespace hvdtune::metrics {

struct MetricsOptions {
  /// HOROVOD_METRICS_PORT: a rank serves on base_port + its local rank;
  /// 0 = any free port; negative = no endpoint (metrics are still kept).
  int base_port = -1;
  /// HVDTUNE_METRICS_ADDRESS: the address the endpoint binds.
  std::string bind_address = "127.0.0.1";
};

class MetricsSink : public EventSink {
 public:
  /// The families are built in OnStart, once the rank is known.
  explicit MetricsSink(MetricsOptions options);
  ~MetricsSink() override;

  void OnStart(const RuntimeInfo& info) override;
  void OnCycle(const CycleEvent& e) override;
  void OnCollective(const CollectiveEvent& e) override;
  void OnTensor(const TensorEvent& e) override;
  void OnKnobsApplied(const KnobsAppliedEvent& e) override;
  void OnAutotuneSample(const AutotuneSampleEvent& e) override;
  void OnPhaseChange(const PhaseChangeEvent& e) override;
  void OnError(const ErrorEvent& e) override;
  void OnStall(const StallEvent& e) override;
  void OnStoreLookup(const StoreLookupEvent& e) override;

  /// Rank 0's config store writes that ended, by result: "written",
  /// "dropped" (queue full, server away, shutdown) or "failed". Any thread;
  /// nothing before OnStart.
  void CountStoreWrites(std::string_view result, std::uint64_t n);
  /// The collective now executing has been inside the backend for
  /// `waited_seconds` (0: none), and `unreachable_ranks` ranks did not
  /// answer this rank during that wait. Any thread; nothing before OnStart.
  void SetBackendWait(double waited_seconds, int unreachable_ranks);

  /// The port the endpoint listens on; 0 when there is none (not
  /// configured, or binding failed).
  int port() const;
  /// "http://ADDRESS:PORT/metrics", or empty when there is no endpoint.
  std::string endpoint() const;
  /// The current metrics in Prometheus' text format (what a scrape gets).
  std::string Scrape() const;

 private:
  struct State;
  MetricsOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace hvdtune::metrics
