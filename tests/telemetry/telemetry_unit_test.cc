// Metrics sink and telemetry settings without MPI: the sink's families
// follow the events it is given; bad HOROVOD_METRICS_* / HOROVOD_TIMELINE*
// values stop configuration with the variable's name.
#include <gtest/gtest.h>
#include <time.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "hvdtune/config.h"
#include "hvdtune/metrics/metrics_sink.h"
#include "hvdtune/status.h"

namespace hvdtune {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(TelemetrySettings, Defaults) {
  const TelemetrySettings s = ParseConfig(Env({})).telemetry;
  EXPECT_EQ(s.metrics_port, -1);
  EXPECT_EQ(s.metrics_address, "127.0.0.1");
  EXPECT_TRUE(s.timeline_path.empty());
  EXPECT_FALSE(s.timeline_mark_cycles);
}

TEST(TelemetrySettings, ParsesValues) {
  const TelemetrySettings s =
      ParseConfig(Env({{"HOROVOD_METRICS_PORT", "9400"},
                       {"HVDTUNE_METRICS_ADDRESS", "::1"},
                       {"HOROVOD_TIMELINE", "/tmp/t.json"},
                       {"HOROVOD_TIMELINE_MARK_CYCLES", "1"}}))
          .telemetry;
  EXPECT_EQ(s.metrics_port, 9400);
  EXPECT_EQ(s.metrics_address, "::1");
  EXPECT_EQ(s.timeline_path, "/tmp/t.json");
  EXPECT_TRUE(s.timeline_mark_cycles);
}

void ExpectRejected(const char* var, const char* value) {
  try {
    ParseConfig(Env({{var, value}}));
    FAIL() << var << "=" << value << " was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(var), std::string::npos) << e.what();
  }
}

TEST(TelemetrySettings, RejectsBadValues) {
  ExpectRejected("HOROVOD_METRICS_PORT", "80a");
  ExpectRejected("HOROVOD_METRICS_PORT", "65536");
  ExpectRejected("HOROVOD_METRICS_PORT", "-1");
  ExpectRejected("HVDTUNE_METRICS_ADDRESS", "localhost:80");
  ExpectRejected("HOROVOD_TIMELINE", "");
  ExpectRejected("HOROVOD_TIMELINE_MARK_CYCLES", "maybe");
}

// The value of the series `name{...}` whose labels include every one of
// `labels` ("key=\"value\"" each), whatever their order; -1 when none.
double Value(const std::string& text, const std::string& name,
             std::vector<std::string> labels) {
  labels.push_back("rank=\"3\"");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    const std::string set = line.substr(0, line.find('}') + 1);
    bool all = true;
    for (const std::string& l : labels) {
      all = all && (set.find("{" + l + ",") != std::string::npos ||
                    set.find("," + l + ",") != std::string::npos ||
                    set.find("," + l + "}") != std::string::npos ||
                    set.find("{" + l + "}") != std::string::npos);
    }
    if (all) return std::stod(line.substr(line.find('}') + 2));
  }
  return -1;
}

TEST(MetricsSink, FamiliesFollowEvents) {
  metrics::MetricsSink sink(metrics::MetricsOptions{});  // no endpoint
  RuntimeInfo info;
  info.rank = 3;
  info.size = 4;
  sink.OnStart(info);
  EXPECT_EQ(sink.port(), 0);
  EXPECT_EQ(sink.endpoint(), "");
  CycleEvent c;
  c.start = 1;
  c.seconds = 0.002;
  c.tensors = 5;
  c.bytes = 1000;
  c.fused_bytes = 500;
  c.fusion_threshold = 1000;
  c.cache_hits = 4;
  c.cache_misses = 1;
  sink.OnCycle(c);
  CollectiveEvent col;
  col.algorithm = "ring";
  col.bytes = 1000;
  col.seconds = 0.001;
  sink.OnCollective(col);
  TensorEvent t;
  t.name = "layer1/weight";
  t.bytes = 200;
  sink.OnTensor(t);
  AutotuneSampleEvent s;
  s.phase = AutotunePhase::kWarmup;
  s.score = 5e8;
  s.best_score = 5e8;
  sink.OnAutotuneSample(s);
  PhaseChangeEvent frozen;
  frozen.from = AutotunePhase::kExploring;
  frozen.to = AutotunePhase::kFrozen;
  frozen.estimate = {6e8, 5.5e8, 6.5e8, 3};
  frozen.reference = {5e8, 4.6e8, 5.4e8, 2};
  frozen.reference_score = 5e8;
  frozen.gain = {0.2, 0.08, 0.33, 0};
  sink.OnPhaseChange(frozen);
  PhaseChangeEvent p;
  p.from = AutotunePhase::kFrozen;
  p.to = AutotunePhase::kRetuning;
  sink.OnPhaseChange(p);
  KnobsAppliedEvent k;
  k.values.Set(KnobId::kFusionThreshold, 1 << 20);
  sink.OnKnobsApplied(k);
  sink.OnError({ErrorEvent::Kind::kMismatch, "x", "shape", 1});
  sink.OnStall({"y", {1}, 61, false, 2});
  sink.OnStoreLookup({StoreLookupEvent::Result::kNear, "fp", 3});
  sink.CountStoreWrites("written", 7);
  sink.CountStoreWrites("dropped", 2);
  sink.CountStoreWrites("dropped", 1);
  sink.SetBackendWait(7.5, 2);

  const std::string text = sink.Scrape();
  EXPECT_EQ(text.find("layer1"), std::string::npos);
  EXPECT_EQ(Value(text, "hvdtune_collective_bytes_total",
                  {"op=\"allreduce\"", "algorithm=\"ring\""}),
            1000);
  EXPECT_EQ(Value(text, "hvdtune_response_cache_hits_total", {}), 4);
  EXPECT_EQ(Value(text, "hvdtune_fusion_fill_ratio", {}), 0.5);
  EXPECT_EQ(Value(text, "hvdtune_autotune_initial_score_bytes_per_second", {}),
            5e8);
  EXPECT_EQ(Value(text, "hvdtune_autotune_phase", {"phase=\"retuning\""}), 1);
  // The last freeze's estimates, each with its 95% interval.
  EXPECT_EQ(Value(text, "hvdtune_autotune_frozen_estimate_bytes_per_second",
                  {"bound=\"mean\""}),
            6e8);
  EXPECT_EQ(Value(text, "hvdtune_autotune_frozen_estimate_bytes_per_second",
                  {"bound=\"low\""}),
            5.5e8);
  EXPECT_EQ(Value(text, "hvdtune_autotune_initial_estimate_bytes_per_second",
                  {"bound=\"high\""}),
            5.4e8);
  EXPECT_EQ(
      Value(text, "hvdtune_autotune_gain_estimate_ratio", {"bound=\"low\""}),
      0.08);
  EXPECT_EQ(Value(text, "hvdtune_autotune_phase", {"phase=\"off\""}), 0);
  EXPECT_EQ(Value(text, "hvdtune_autotune_retunes_total", {}), 1);
  EXPECT_EQ(Value(text, "hvdtune_knob_value", {"knob=\"fusion_threshold\""}),
            1 << 20);
  EXPECT_EQ(Value(text, "hvdtune_errors_total", {"kind=\"mismatch\""}), 1);
  EXPECT_EQ(Value(text, "hvdtune_stalls_total", {"kind=\"warning\""}), 1);
  EXPECT_EQ(Value(text, "hvdtune_store_lookups_total", {"result=\"near\""}), 1);
  EXPECT_EQ(Value(text, "hvdtune_store_lookups_total", {"result=\"hit\""}), 0);
  EXPECT_EQ(Value(text, "hvdtune_store_writes_total", {"result=\"written\""}),
            7);
  EXPECT_EQ(Value(text, "hvdtune_store_writes_total", {"result=\"dropped\""}),
            3);
  EXPECT_EQ(Value(text, "hvdtune_store_writes_total", {"result=\"failed\""}),
            0);
  EXPECT_EQ(Value(text, "hvdtune_tensors_total",
                  {"op=\"allreduce\"", "dtype=\"float32\""}),
            1);
  EXPECT_EQ(Value(text, "hvdtune_backend_wait_seconds", {}), 7.5);
  EXPECT_EQ(Value(text, "hvdtune_unreachable_ranks", {}), 2);
  EXPECT_NE(text.find("hvdtune_build_info{"), std::string::npos);
  // The stall ends: both go back to 0.
  sink.SetBackendWait(0, 0);
  const std::string after = sink.Scrape();
  EXPECT_EQ(Value(after, "hvdtune_backend_wait_seconds", {}), 0);
  EXPECT_EQ(Value(after, "hvdtune_unreachable_ranks", {}), 0);
}

}  // namespace
}  // namespace hvdtune

namespace hvdtune {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The metrics sink's cost on the cycle thread for one cycle of 1,000
// tensors (1,000 tensor events, 1 fused collective, 1 cycle event), in CPU
// time of this thread (so other load on the machine does not count).
// negotiation_bench puts the cycle itself at about 10 ms on this machine:
// 1% of it is 100 us.
TEST(MetricsSink, HotPathCostPerCycleOf1000Tensors) {
  metrics::MetricsSink sink(metrics::MetricsOptions{});
  sink.OnStart(RuntimeInfo{});
  TensorEvent t;
  t.name = "layer/weight";
  t.bytes = 4;
  CollectiveEvent c;
  c.algorithm = "native";
  c.bytes = 4000;
  c.tensors = 1000;
  c.seconds = 1e-4;
  CycleEvent cycle;
  cycle.tensors = 1000;
  cycle.bytes = 4000;
  cycle.fused_bytes = 4000;
  cycle.fusion_threshold = 64 << 20;
  cycle.cache_hits = 1000;
  constexpr int kCycles = 2000;
  const double start = ThreadCpuSeconds();
  for (int i = 0; i < kCycles; ++i) {
    for (int k = 0; k < 1000; ++k) sink.OnTensor(t);
    sink.OnCollective(c);
    cycle.start = i * 0.01;
    cycle.seconds = 0.01;
    sink.OnCycle(cycle);
  }
  const double us = (ThreadCpuSeconds() - start) / kCycles * 1e6;
  std::printf("metrics sink: %.1f us of CPU per cycle of 1000 tensors\n", us);
  EXPECT_LT(us, 100.0);
}

}  // namespace
}  // namespace hvdtune
