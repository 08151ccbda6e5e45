// The metric families of one rank, built once at start, and the children
// the event handlers update (looked up by index, never by tensor name).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "hvdtune/events.h"
#include "hvdtune/knobs.h"

namespace hvdtune::metrics::internal {

inline constexpr int kNumOps = kNumCollectiveTypes;
inline constexpr int kNumPhases = 5;      // AutotunePhase
inline constexpr int kNumErrorKinds = 6;  // ErrorEvent::Kind

/// Counters of one (op, algorithm) pair.
struct AlgorithmChildren {
  std::string algorithm;
  prometheus::Counter* bytes = nullptr;
  prometheus::Counter* operations = nullptr;
};

struct Families {
  /// Builds every family with the constant label rank="R".
  Families(prometheus::Registry& registry, const RuntimeInfo& info);

  /// The (op, algorithm) counters; a name not seen at start gets its own
  /// children (bounded by the algorithm registry).
  AlgorithmChildren& Algorithm(CollectiveType op, std::string_view name);

  prometheus::Family<prometheus::Counter>* bytes_family;
  prometheus::Family<prometheus::Counter>* operations_family;
  std::array<std::vector<AlgorithmChildren>, kNumOps> algorithms;
  std::array<prometheus::Histogram*, kNumOps> collective_latency{};
  std::array<std::array<prometheus::Counter*, kNumDataTypes>, kNumOps>
      tensors{};
  std::array<std::array<prometheus::Counter*, kNumDataTypes>, kNumOps>
      tensor_bytes{};

  prometheus::Counter* cycles;
  prometheus::Counter* active_cycles;
  prometheus::Histogram* cycle_duration;
  prometheus::Histogram* negotiation_duration;
  prometheus::Histogram* cycle_tensors;
  prometheus::Gauge* fusion_fill;
  prometheus::Counter* fused_bytes;
  prometheus::Counter* cache_hits;
  prometheus::Counter* cache_misses;
  prometheus::Gauge* throughput;

  std::array<prometheus::Gauge*, kNumKnobs> knob_value{};
  /// Categorical and bool knobs: one 0/1 gauge per choice.
  std::array<std::vector<prometheus::Gauge*>, kNumKnobs> knob_choice{};
  prometheus::Counter* knob_changes;

  std::array<prometheus::Gauge*, kNumPhases> phase{};
  prometheus::Counter* samples;
  prometheus::Counter* retunes;
  prometheus::Gauge* last_score;
  prometheus::Gauge* best_score;
  prometheus::Gauge* initial_score;
  /// The model's estimates at the last freeze, by bound: mean, low, high
  /// (the 95% interval).
  std::array<prometheus::Gauge*, 3> frozen_estimate{};
  std::array<prometheus::Gauge*, 3> initial_estimate{};
  std::array<prometheus::Gauge*, 3> gain_estimate{};

  std::array<prometheus::Counter*, kNumErrorKinds> errors{};
  prometheus::Counter* stall_warnings;
  prometheus::Counter* stall_shutdowns;
  /// hit, near, miss, error (the configuration store's lookups).
  std::array<prometheus::Counter*, 4> store_lookups{};
  // written, dropped, failed
  std::array<prometheus::Counter*, 3> store_writes{};
  prometheus::Gauge* backend_wait;
  prometheus::Gauge* unreachable_ranks;
};

/// Sets every knob's gauges to `values`.
void SetKnobs(Families& f, const KnobSettings& values);

}  // namespace hvdtune::metrics::internal
