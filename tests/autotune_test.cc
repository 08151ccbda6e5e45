#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "autotune/parameter_manager.h"
#include "autotune/throughput_meter.h"
#include "hvdtune/status.h"
#include "test_env.h"

namespace hvdtune::internal {
namespace {

using testing_util::MapEnv;

TEST(ThroughputMeter, StepsFromRepeatingNames) {
  ThroughputMeter m;
  double t = 0;
  for (int step = 0; step < 3; ++step) {
    for (const char* n : {"a", "b", "c"}) m.OnTensorDone(n, 100, t += 1);
    t += 7;  // the rest of the step (forward pass ...)
  }
  const auto steps = m.TakeSteps();
  ASSERT_EQ(steps.size(), 2u);  // the third is still open
  for (const auto& s : steps) {
    EXPECT_DOUBLE_EQ(s.bytes, 300);
    EXPECT_DOUBLE_EQ(s.seconds, 10);
  }
  EXPECT_TRUE(m.TakeSteps().empty());
}

TEST(ThroughputMeter, ExplicitMarksOverrideNames) {
  ThroughputMeter m;
  m.OnTensorDone("a", 50, 1);
  m.MarkStep(2);  // first mark starts explicit mode
  m.OnTensorDone("a", 10, 3);
  m.OnTensorDone("a", 10, 4);  // a repeat no longer closes a step
  m.MarkStep(6);
  const auto steps = m.TakeSteps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_DOUBLE_EQ(steps[0].bytes, 20);
  EXPECT_DOUBLE_EQ(steps[0].seconds, 4);
}

TEST(AutotuneSettings, HorovodDefaultsAndStrictParsing) {
  const AutotuneSettings d = ParseAutotuneSettings(MapEnv({}));
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.warmup_samples, 3);
  EXPECT_EQ(d.steps_per_sample, 10);
  EXPECT_EQ(d.max_samples, 20);
  EXPECT_DOUBLE_EQ(d.gaussian_process_noise, 0.8);
  const AutotuneSettings s = ParseAutotuneSettings(
      MapEnv({{"HOROVOD_AUTOTUNE", "1"},
              {"HOROVOD_AUTOTUNE_LOG", "/tmp/x.csv"},
              {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "5"}}));
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.log_path, "/tmp/x.csv");
  EXPECT_EQ(s.steps_per_sample, 5);
  for (auto [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"HOROVOD_AUTOTUNE", "maybe"},
           {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "0"},
           {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "-1"},
           {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "lots"},
           {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0"}}) {
    try {
      ParseAutotuneSettings(MapEnv({{var, value}}));
      ADD_FAILURE() << var << "=" << value << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(var), std::string::npos);
    }
  }
}

// A made-up job whose throughput peaks at a 16 MiB fusion threshold and a
// 2 ms cycle time, with the cache on; multiplicative noise of +-5%.
double Throughput(const KnobSettings& k, std::uint64_t* rng) {
  const double f =
      std::log2(static_cast<double>(k.fusion_threshold_bytes()) / (16 << 20));
  const double c = std::log2(k.cycle_time_ms() / 2.0);
  double score = 1e9 * std::exp(-0.08 * f * f - 0.3 * c * c);
  if (k.cache_capacity() == 0) score *= 0.8;
  *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
  const double u = static_cast<double>(*rng >> 11) / 9007199254740992.0;
  return score * (0.95 + 0.1 * u);
}

struct TuningRun {
  int steps = 0;
  KnobSettings final_knobs;
  AutotuneStatus status;
  std::vector<KnobSettings> applied;
};

bool Frozen(const ParameterManager& p) {
  return p.status().phase == AutotunePhase::kFrozen;
}

TuningRun Drive(ParameterManager& pm, KnobSettings knobs, int max_steps,
                bool (*stop)(const ParameterManager&) = nullptr) {
  TuningRun run;
  std::uint64_t rng = 42;
  double now = 0;
  for (; run.steps < max_steps; ++run.steps) {
    const double seconds = 1e8 / Throughput(knobs, &rng);
    now += seconds;
    if (auto next = pm.OnStep(1e8, seconds, now)) {
      knobs = *next;
      run.applied.push_back(knobs);
    }
    if (stop && stop(pm)) break;
  }
  run.final_knobs = knobs;
  run.status = pm.status();
  return run;
}

TEST(ParameterManager, WarmsUpExploresAndFreezesOnSomethingBetter) {
  AutotuneSettings s;
  s.enabled = true;
  s.steps_per_sample = 3;
  s.warmup_samples = 2;
  s.max_samples = 20;
  KnobSettings initial;  // 128 MiB, 1 ms: 0.75 of the peak
  ParameterManager pm(s, {}, initial);
  EXPECT_EQ(pm.status().phase, AutotunePhase::kWarmup);
  const TuningRun run = Drive(pm, initial, 2000, Frozen);
  ASSERT_EQ(run.status.phase, AutotunePhase::kFrozen);
  EXPECT_EQ(run.status.samples, 20);
  // Warm-up + 20 samples, one skipped step after each change.
  EXPECT_LE(run.steps, (2 + 20) * 4 + 4);
  EXPECT_EQ(run.final_knobs, run.status.best);
  // The incumbent (best posterior mean) need not have scored above the
  // initial configuration, but it is one that was measured: the initial one
  // or one applied before the freeze (the last change applies the best).
  ASSERT_FALSE(run.applied.empty());
  std::vector<KnobSettings> measured(run.applied.begin(),
                                     run.applied.end() - 1);
  measured.push_back(initial);
  EXPECT_NE(std::find(measured.begin(), measured.end(), run.status.best),
            measured.end())
      << run.status.best.ToString();
  std::uint64_t rng = 7;
  double best = 0, dflt = 0;
  for (int i = 0; i < 50; ++i) {
    best += Throughput(run.status.best, &rng);
    dflt += Throughput(initial, &rng);
  }
  EXPECT_GT(best, dflt * 1.15) << run.status.best.ToString();
  const std::vector<std::string> tuned = pm.tuned_knobs();
  EXPECT_NE(std::find(tuned.begin(), tuned.end(), "fusion_threshold"),
            tuned.end());
  EXPECT_NE(std::find(tuned.begin(), tuned.end(), "cycle_time"), tuned.end());
}

TEST(ParameterManager, PinnedKnobsNeverChange) {
  AutotuneSettings s;
  s.enabled = true;
  s.steps_per_sample = 2;
  s.warmup_samples = 1;
  s.max_samples = 10;
  TuningScope scope;
  scope.pinned[static_cast<int>(KnobId::kCycleTime)] = true;
  scope.pinned[static_cast<int>(KnobId::kCacheCapacity)] = true;
  KnobSettings initial;
  initial.Set(KnobId::kCycleTime, 3.5);
  initial.Set(KnobId::kCacheCapacity, 77);
  ParameterManager pm(s, scope, initial);
  const TuningRun run = Drive(pm, initial, 200);
  ASSERT_FALSE(run.applied.empty());
  for (const KnobSettings& k : run.applied) {
    EXPECT_EQ(k.cycle_time_ms(), 3.5);
    EXPECT_EQ(k.cache_capacity(), 77);
    EXPECT_EQ(k.num_groups(), 0);              // the app did not allow grouping
    EXPECT_FALSE(k.hierarchical_allgather());  // one node
  }
}

TEST(ParameterManager, EverythingPinnedMeansNothingToTune) {
  AutotuneSettings s;
  s.enabled = true;
  TuningScope scope;
  scope.pinned.fill(true);
  ParameterManager pm(s, scope, KnobSettings());
  EXPECT_TRUE(pm.tuned_knobs().empty());
  EXPECT_TRUE(Drive(pm, KnobSettings(), 100).applied.empty());
}

TEST(ParameterManager, LogHasHorovodColumnsAndOneRowPerSample) {
  const std::string path = ::testing::TempDir() + "/hvdtune_autotune.csv";
  AutotuneSettings s;
  s.enabled = true;
  s.log_path = path;
  s.steps_per_sample = 2;
  s.warmup_samples = 1;
  s.max_samples = 6;
  {
    ParameterManager pm(s, {}, KnobSettings());
    Drive(pm, KnobSettings(), 100, Frozen);
  }
  std::ifstream in(path);
  std::string header, line;
  ASSERT_TRUE(std::getline(in, header));
  EXPECT_EQ(header.rfind("hierarchical_allreduce,hierarchical_allgather,"
                         "cache_enabled,cycle_time_ms,tensor_fusion_"
                         "threshold,score,sample,phase,timestamp",
                         0),
            0u);
  const auto columns = std::count(header.begin(), header.end(), ',') + 1;
  int rows = 0, exploring = 0;
  while (std::getline(in, line)) {
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), ',') + 1, columns) << line;
    std::stringstream ss(line);
    std::string cell;
    std::vector<std::string> cells;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    EXPECT_GT(std::stod(cells[5]), 0) << line;  // score
    if (cells[7] == "exploring") ++exploring;
  }
  // 1 warm-up row + 6 samples, the first of which is the warm-up's own
  // configuration and is scored without a new measurement.
  EXPECT_EQ(rows, 1 + 5);
  EXPECT_EQ(exploring, 5);
  std::remove(path.c_str());
}

TEST(ParameterManager, SustainedDropReopensTuning) {
  AutotuneSettings s;
  s.enabled = true;
  s.steps_per_sample = 2;
  s.warmup_samples = 1;
  s.max_samples = 5;
  s.retune_drop = 0.15;
  s.retune_windows = 2;
  ParameterManager pm(s, {}, KnobSettings());
  TuningRun run = Drive(pm, KnobSettings(), 500, Frozen);
  ASSERT_EQ(run.status.phase, AutotunePhase::kFrozen);
  // Same knobs, but the job now runs at half speed.
  double now = 1e6;
  KnobSettings knobs = run.final_knobs;
  bool retuning = false;
  std::uint64_t rng = 3;
  for (int i = 0; i < 40 && !retuning; ++i) {
    const double slow = i < 6 ? 1.0 : 0.5;
    const double seconds = 1e8 / (slow * Throughput(knobs, &rng));
    now += seconds;
    if (auto next = pm.OnStep(1e8, seconds, now)) knobs = *next;
    retuning = pm.status().phase == AutotunePhase::kRetuning;
  }
  EXPECT_TRUE(retuning);
}

}  // namespace
}  // namespace hvdtune::internal
