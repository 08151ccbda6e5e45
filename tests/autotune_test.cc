#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "hvdtune/knob_space.h"
#include "hvdtune/services.h"
#include "hvdtune/status.h"
#include "hvdtune/store/fingerprint.h"
#include "hvdtune/store_mapping.h"
#include "root/autotune/throughput_meter.h"
#include "root/sinks/autotune_log.h"
#include "root/sinks/config_store.h"
#include "root/sinks/stderr_log.h"
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
  EXPECT_DOUBLE_EQ(d.sample_precision, 0.1);
  EXPECT_DOUBLE_EQ(d.max_sample_seconds, 3.0);
  EXPECT_EQ(d.max_steps_per_sample, 0);
  const AutotuneSettings adaptive = ParseAutotuneSettings(
      MapEnv({{"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "4"},
              {"HVDTUNE_AUTOTUNE_SAMPLE_PRECISION", "0"},
              {"HVDTUNE_AUTOTUNE_MAX_SAMPLE_SECONDS", "0.5"},
              {"HVDTUNE_AUTOTUNE_MAX_STEPS_PER_SAMPLE", "4"}}));
  EXPECT_EQ(adaptive.sample_precision, 0);
  EXPECT_DOUBLE_EQ(adaptive.max_sample_seconds, 0.5);
  EXPECT_EQ(adaptive.max_steps_per_sample, 4);
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
           {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0"},
           // The policy needs a drop below 1: refused at init, not later.
           {"HVDTUNE_AUTOTUNE_RETUNE_DROP", "1"},
           {"HVDTUNE_AUTOTUNE_RETUNE_DROP", "1.5"},
           {"HVDTUNE_AUTOTUNE_SAMPLE_PRECISION", "-0.1"},
           {"HVDTUNE_AUTOTUNE_SAMPLE_PRECISION", "5%"},
           {"HVDTUNE_AUTOTUNE_SAMPLE_PRECISION", "2"},
           {"HVDTUNE_AUTOTUNE_MAX_SAMPLE_SECONDS", "-1"},
           {"HVDTUNE_AUTOTUNE_MAX_SAMPLE_SECONDS", "soon"},
           // Below the default HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE (10).
           {"HVDTUNE_AUTOTUNE_MAX_STEPS_PER_SAMPLE", "5"},
           {"HVDTUNE_AUTOTUNE_MAX_STEPS_PER_SAMPLE", "-1"}}) {
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
  std::vector<AutotuneSampleEvent> samples;
  std::vector<PhaseChangeEvent> phases;
};

TuningContext Context(const AutotuneSettings& s, KnobConfig knobs = {}) {
  TuningContext ctx;
  ctx.settings = s;
  ctx.knobs = knobs;
  ctx.info.knobs = knobs.values;
  return ctx;
}

bool Frozen(const Autotuner& a) {
  return a.status().phase == AutotunePhase::kFrozen;
}

// Runs steps of one tensor "g" (a repeated name closes a step) through the
// autotuner as the cycle loop would: events, then Poll. The optimizer runs
// on the autotuner's thread, so steps that end while it computes are not
// scored; the run is bounded by steps and wall time.
TuningRun Drive(Autotuner& a, KnobSettings knobs, int max_steps,
                bool (*stop)(const Autotuner&) = nullptr,
                double slow_after_frozen = 1.0) {
  TuningRun run;
  std::uint64_t rng = 42;
  double now = 0;
  int frozen_steps = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (; run.steps < max_steps && std::chrono::steady_clock::now() < deadline;
       ++run.steps) {
    // The slowdown starts a few samples into the frozen phase.
    if (Frozen(a)) ++frozen_steps;
    const double slow = frozen_steps > 8 ? slow_after_frozen : 1.0;
    now += 1e8 / (slow * Throughput(knobs, &rng));
    TensorEvent e;
    e.name = "g";
    e.bytes = 100000000;
    e.finished = now;
    a.OnTensor(e);
    Autotuner::Output out = a.Poll(now);
    if (out.update) {
      knobs = *out.update;
      run.applied.push_back(knobs);
    }
    for (auto& x : out.samples) run.samples.push_back(x);
    for (auto& x : out.phase_changes) run.phases.push_back(x);
    if (stop && stop(a)) break;
    if (run.steps % 64 == 0) std::this_thread::yield();
  }
  run.final_knobs = knobs;
  run.status = a.status();
  return run;
}

TEST(GpAutotuner, WarmsUpExploresAndFreezesOnSomethingBetter) {
  AutotuneSettings s;
  s.enabled = true;
  s.steps_per_sample = 3;
  s.warmup_samples = 2;
  s.max_samples = 20;
  KnobSettings initial;  // 128 MiB, 1 ms: 0.75 of the peak
  auto a = MakeGpAutotuner(Context(s));
  EXPECT_EQ(a->status().phase, AutotunePhase::kWarmup);
  const TuningRun run = Drive(*a, initial, 1000000, Frozen);
  ASSERT_EQ(run.status.phase, AutotunePhase::kFrozen);
  EXPECT_EQ(run.status.samples, 20);
  EXPECT_EQ(run.final_knobs, run.status.best);
  // Samples are numbered 1, 2, 3, ... over warm-up and exploration.
  ASSERT_EQ(run.samples.size(), 2u + 19u);
  for (std::size_t i = 0; i < run.samples.size(); ++i) {
    EXPECT_EQ(run.samples[i].index, static_cast<int>(i) + 1);
  }
  EXPECT_EQ(run.samples[0].phase, AutotunePhase::kWarmup);
  EXPECT_EQ(run.samples[2].phase, AutotunePhase::kExploring);
  ASSERT_FALSE(run.phases.empty());
  EXPECT_EQ(run.phases.back().to, AutotunePhase::kFrozen);
  EXPECT_EQ(run.phases.back().values, run.status.best);
  std::uint64_t rng = 7;
  double best = 0, dflt = 0;
  for (int i = 0; i < 50; ++i) {
    best += Throughput(run.status.best, &rng);
    dflt += Throughput(initial, &rng);
  }
  EXPECT_GT(best, dflt * 1.15) << run.status.best.ToString();
  const std::vector<std::string>& tuned = run.status.tuned_knobs;
  EXPECT_NE(std::find(tuned.begin(), tuned.end(), "fusion_threshold"),
            tuned.end());
  EXPECT_NE(std::find(tuned.begin(), tuned.end(), "cycle_time"), tuned.end());
}

TEST(GpAutotuner, PinnedKnobsNeverChange) {
  AutotuneSettings s;
  s.enabled = true;
  s.steps_per_sample = 2;
  s.warmup_samples = 1;
  s.max_samples = 10;
  KnobConfig knobs;
  knobs.pinned[static_cast<int>(KnobId::kCycleTime)] = true;
  knobs.pinned[static_cast<int>(KnobId::kCacheCapacity)] = true;
  knobs.values.Set(KnobId::kCycleTime, 3.5);
  knobs.values.Set(KnobId::kCacheCapacity, 77);
  auto a = MakeGpAutotuner(Context(s, knobs));
  const TuningRun run = Drive(*a, knobs.values, 1000000, Frozen);
  ASSERT_FALSE(run.applied.empty());
  for (const KnobSettings& k : run.applied) {
    EXPECT_EQ(k.cycle_time_ms(), 3.5);
    EXPECT_EQ(k.cache_capacity(), 77);
    EXPECT_EQ(k.num_groups(), 0);              // the app did not allow grouping
    EXPECT_FALSE(k.hierarchical_allgather());  // one node
  }
}

TEST(GpAutotuner, EverythingPinnedMeansNothingToTune) {
  AutotuneSettings s;
  s.enabled = true;
  KnobConfig knobs;
  knobs.pinned.fill(true);
  auto a = MakeGpAutotuner(Context(s, knobs));
  EXPECT_TRUE(a->status().tuned_knobs.empty());
  EXPECT_EQ(a->status().phase, AutotunePhase::kFrozen);
  EXPECT_TRUE(Drive(*a, KnobSettings(), 100).applied.empty());
}

// The search space follows the knob table: on/off for the cache, the
// multi-node and grouping conditions, pins.
TEST(KnobSpace, FollowsTheTable) {
  KnobConfig knobs;
  const KnobSpace one(knobs, false, false);
  const auto names = one.tuned_knobs();
  EXPECT_EQ(std::count(names.begin(), names.end(), "hierarchical_allgather"),
            0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "num_groups"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "pipeline_chunk_bytes"), 0);
  const KnobSpace many(knobs, true, true);
  const auto all = many.tuned_knobs();
  EXPECT_EQ(std::count(all.begin(), all.end(), "hierarchical_allgather"), 1);
  EXPECT_EQ(std::count(all.begin(), all.end(), "num_groups"), 1);
  // Cache: off <-> the configured capacity.
  knobs.values.Set(KnobId::kCacheCapacity, 300);
  const KnobSpace cache(knobs, false, false);
  const std::size_t at =
      static_cast<std::size_t>(std::find(cache.ids().begin(), cache.ids().end(),
                                         KnobId::kCacheCapacity) -
                               cache.ids().begin());
  tuner::Config c = cache.ToConfig(knobs.values);
  EXPECT_EQ(c[at], 1.0);
  c[at] = 0.0;
  EXPECT_EQ(cache.FromConfig(c, knobs.values).cache_capacity(), 0);
  c[at] = 1.0;
  EXPECT_EQ(cache.FromConfig(c, knobs.values).cache_capacity(), 300);
}

// Each engine's search space holds the algorithm choices it serves: MPI's
// three, Gloo's five; the tuner's category c is the c-th served choice, and a
// value the engine does not serve maps to its first.
TEST(KnobSpace, AlgorithmChoicesAreTheEngines) {
  KnobConfig knobs;
  const KnobSpec& spec = GetKnobSpec(KnobId::kAllreduceAlgorithm);
  for (const EngineKind engine : {EngineKind::kMpi, EngineKind::kGloo}) {
    const KnobSpace space(knobs, KnobSpace::Scope{.engine = engine});
    const auto& ids = space.ids();
    const auto at = static_cast<std::size_t>(
        std::find(ids.begin(), ids.end(), KnobId::kAllreduceAlgorithm) -
        ids.begin());
    ASSERT_LT(at, ids.size());
    std::vector<std::string> served;
    for (std::size_t i = 0; i < spec.choices.size(); ++i) {
      if (spec.Serves(engine, i)) served.emplace_back(spec.choices[i]);
    }
    EXPECT_EQ(served.size(), engine == EngineKind::kMpi ? 3u : 5u);
    tuner::Config c = space.ToConfig(knobs.values);
    for (std::size_t k = 0; k < served.size(); ++k) {
      c[at] = static_cast<double>(k);
      const KnobSettings v = space.FromConfig(c, knobs.values);
      EXPECT_EQ(v.allreduce_algorithm_name(), served[k]);
      EXPECT_EQ(space.ToConfig(v)[at], static_cast<double>(k));
    }
  }
}

// The cycle thread's boost is tuned only on more than one node where the
// process may raise a priority; on = the configured levels, else tune_max.
TEST(KnobSpace, CycleThreadBoostNeedsNodesAndPrivilege) {
  KnobConfig knobs;
  const auto tuned = [&](bool multi_node, bool raisable) {
    const KnobSpace space(knobs,
                          KnobSpace::Scope{.multi_node = multi_node,
                                           .priority_raisable = raisable});
    const auto names = space.tuned_knobs();
    return std::count(names.begin(), names.end(), "cycle_thread_boost");
  };
  EXPECT_EQ(tuned(false, false), 0);
  EXPECT_EQ(tuned(false, true), 0);
  EXPECT_EQ(tuned(true, false), 0);
  EXPECT_EQ(tuned(true, true), 1);
  const auto two_flags = KnobSpace(knobs, true, true).tuned_knobs();
  EXPECT_EQ(
      std::count(two_flags.begin(), two_flags.end(), "cycle_thread_boost"), 0)
      << "the two-flag constructor leaves the boost out";

  const auto on_value = [&](const KnobConfig& k) {
    const KnobSpace space(
        k, KnobSpace::Scope{.multi_node = true, .priority_raisable = true});
    const auto& ids = space.ids();
    const auto at = static_cast<std::size_t>(
        std::find(ids.begin(), ids.end(), KnobId::kCycleThreadBoost) -
        ids.begin());
    tuner::Config c = space.ToConfig(k.values);
    EXPECT_EQ(c.at(at), k.values.cycle_thread_boost() > 0 ? 1.0 : 0.0);
    c[at] = 0.0;
    EXPECT_EQ(space.FromConfig(c, k.values).cycle_thread_boost(), 0);
    c[at] = 1.0;
    return space.FromConfig(c, k.values).cycle_thread_boost();
  };
  EXPECT_EQ(on_value(knobs), GetKnobSpec(KnobId::kCycleThreadBoost).tune_max);
  KnobConfig five = knobs;
  five.values.Set(KnobId::kCycleThreadBoost, 5);
  EXPECT_EQ(on_value(five), 5);
  // Pinned through the environment: never tuned.
  KnobConfig pinned = five;
  pinned.pinned[static_cast<int>(KnobId::kCycleThreadBoost)] = true;
  const KnobSpace space(
      pinned, KnobSpace::Scope{.multi_node = true, .priority_raisable = true});
  const auto names = space.tuned_knobs();
  EXPECT_EQ(std::count(names.begin(), names.end(), "cycle_thread_boost"), 0);
}

TEST(AutotuneLogSink, ColumnsComeFromTheKnobTable) {
  const std::string header = AutotuneLogSink::Header();
  // Horovod's columns first, then ours, then every knob by name.
  EXPECT_EQ(header.rfind("tensor_fusion_threshold,cycle_time_ms,"
                         "cache_enabled,hierarchical_allreduce,"
                         "hierarchical_allgather,score,sample,phase,"
                         "timestamp",
                         0),
            0u)
      << header;
  // What a sample cost comes last.
  const std::string tail = ",sample_steps,sample_seconds,sample_precision";
  EXPECT_EQ(header.substr(header.size() - tail.size()), tail) << header;
  for (const KnobSpec& spec : KnobTable()) {
    EXPECT_NE(header.find("," + std::string(spec.name)), std::string::npos)
        << spec.name;
  }
}

TEST(AutotuneLogSink, OneRowPerSampleNumberedWithoutGaps) {
  const std::string path = ::testing::TempDir() + "/hvdtune_autotune.csv";
  AutotuneSettings s;
  s.enabled = true;
  s.steps_per_sample = 2;
  s.warmup_samples = 1;
  s.max_samples = 6;
  {
    auto a = MakeGpAutotuner(Context(s));
    const TuningRun run = Drive(*a, KnobSettings(), 1000000, Frozen);
    AutotuneLogSink log(path);
    log.OnStart(RuntimeInfo{});
    for (const auto& e : run.samples) log.OnAutotuneSample(e);
  }
  std::ifstream in(path);
  std::string header, line;
  ASSERT_TRUE(std::getline(in, header));
  const auto columns = std::count(header.begin(), header.end(), ',') + 1;
  int rows = 0, exploring = 0;
  while (std::getline(in, line)) {
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), ',') + 1, columns) << line;
    std::stringstream ss(line);
    std::string cell;
    std::vector<std::string> cells;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    EXPECT_GT(std::stod(cells[5]), 0) << line;     // score
    EXPECT_EQ(std::stoi(cells[6]), rows) << line;  // sample, no gaps
    if (cells[7] == "exploring") ++exploring;
    // sample_steps, sample_seconds (sample_precision may be empty).
    const auto at = static_cast<std::size_t>(columns - 3);
    ASSERT_GT(cells.size(), at + 1) << line;
    EXPECT_GE(std::stoi(cells[at]), s.steps_per_sample) << line;
    EXPECT_GT(std::stod(cells[at + 1]), 0) << line;
  }
  // 1 warm-up row + 6 samples, the first of which is the warm-up's own
  // configuration and is scored without a new measurement.
  EXPECT_EQ(rows, 1 + 5);
  EXPECT_EQ(exploring, 5);
  std::remove(path.c_str());
}

TEST(GpAutotuner, SustainedDropReopensTuning) {
  AutotuneSettings s;
  s.enabled = true;
  s.steps_per_sample = 2;
  s.warmup_samples = 1;
  s.max_samples = 5;
  s.retune_drop = 0.15;
  s.retune_windows = 2;
  // Fixed 2-step samples: the slowdown comes 8 steps into the frozen phase,
  // after the detector's reference.
  s.sample_precision = 0;
  auto a = MakeGpAutotuner(Context(s));
  // Once frozen, the same knobs run at half speed after a while.
  const TuningRun run = Drive(
      *a, KnobSettings(), 1000000,
      [](const Autotuner& x) {
        return x.status().phase == AutotunePhase::kRetuning;
      },
      0.5);
  EXPECT_EQ(run.status.phase, AutotunePhase::kRetuning);
  bool announced = false;
  for (const auto& p : run.phases) {
    if (p.to != AutotunePhase::kRetuning) continue;
    announced = true;
    // Measured against the frozen samples, which ran at full speed.
    EXPECT_GT(p.reference_score, 1.5 * p.score);
  }
  EXPECT_TRUE(announced);
}

}  // namespace
}  // namespace hvdtune::internal

namespace hvdtune::internal {
namespace {

std::string PhaseLine(const PhaseChangeEvent& e) {
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  StderrLogSink().OnPhaseChange(e);
  std::cerr.rdbuf(old);
  return captured.str();
}

// The model is the tensors of the first step, up to the application's first
// step mark. The cycle loop polls the autotuner after every cycle, so the
// mark may reach it in a cycle of its own or in the one that completes the
// next tensor (an elastic job's first step allgathers right after it): the
// fingerprint must not depend on which, or a job back on a world it tuned
// before misses its stored best. A mark before any tensor ends nothing.
TEST(GpAutotuner, TheModelEndsAtTheFirstStepMarkWhicheverPollSeesIt) {
  const std::vector<StepTensor> model = {{DataType::kUInt8, 431},
                                         {DataType::kFloat32, 2048}};
  auto fingerprint = [&](bool mark_in_a_cycle_of_its_own, bool leading_mark) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() /
        ("hvdtune_model_mark_" + std::to_string(getpid()) + "_" +
         std::to_string(mark_in_a_cycle_of_its_own) +
         std::to_string(leading_mark));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto service = std::make_shared<ConfigStoreService>(
        (dir / "store.db").string(), AutotuneStoreMode::kAuto);
    AutotuneSettings s;
    s.enabled = true;
    TuningContext ctx = Context(s);
    ctx.config_source = service;
    auto tuner = MakeGpAutotuner(ctx);
    double now = 0;
    auto done = [&](const char* name, const StepTensor& t) {
      TensorEvent e;
      e.name = name;
      e.dtype = t.dtype;
      e.bytes = t.bytes;
      e.finished = now += 1;
      tuner->OnTensor(e);
    };
    std::ostringstream captured;  // the store's lookup line
    std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
    if (leading_mark) {
      tuner->MarkStep(now += 1);
      tuner->Poll(now);
    }
    done("state", model[0]);  // the state broadcast
    tuner->Poll(now);
    done("grad", model[1]);
    tuner->Poll(now);
    tuner->MarkStep(now += 1);  // optimizer.step()
    if (mark_in_a_cycle_of_its_own) tuner->Poll(now);
    done("check", {DataType::kFloat32, 4096});  // the world's first allgather
    tuner->Poll(now);
    for (int step = 0; step < 3; ++step) {  // the store is asked after step 1
      done("grad", model[1]);
      tuner->MarkStep(now += 1);
      tuner->Poll(now);
    }
    std::cerr.rdbuf(old);
    const std::string got = service->fingerprint();
    service->OnStop();
    std::filesystem::remove_all(dir);
    return got;
  };
  const std::string expected = store::PrintableFingerprint(
      JobHardwareFingerprint(1, 1, 1), StepModelFingerprint(model));
  EXPECT_EQ(fingerprint(true, false), expected);
  EXPECT_EQ(fingerprint(false, false), expected);
  EXPECT_EQ(fingerprint(true, true), expected);
}

TEST(StderrLogSink, FrozenLineComparesWithTheInitialScoreOnlyWhenMeasured) {
  PhaseChangeEvent e;
  e.from = AutotunePhase::kExploring;
  e.to = AutotunePhase::kFrozen;
  e.samples = 20;
  e.score = 2e9;
  e.reference_score = 1e9;
  const std::string tuned = PhaseLine(e);
  EXPECT_NE(tuned.find("frozen after 20 samples"), std::string::npos) << tuned;
  EXPECT_NE(tuned.find("(initial 1.000 GB/s, +100.0%)"), std::string::npos)
      << tuned;
  // Applied from the store: no initial score to compare with.
  e.from = AutotunePhase::kWarmup;
  e.samples = 0;
  e.reference_score = 0;
  const std::string stored = PhaseLine(e);
  EXPECT_EQ(stored.find("initial 0"), std::string::npos) << stored;
  EXPECT_NE(stored.find("the initial configuration was not measured"),
            std::string::npos)
      << stored;
}

TEST(StderrLogSink, FrozenLinePrintsEstimatesWithTheirIntervals) {
  PhaseChangeEvent e;
  e.from = AutotunePhase::kExploring;
  e.to = AutotunePhase::kFrozen;
  e.samples = 20;
  e.estimate = {1.1e9, 1.05e9, 1.16e9, 4};
  e.score = e.estimate.mean;
  e.reference = {1e9, 0.96e9, 1.04e9, 3};
  e.reference_score = e.reference.mean;
  e.gain = {0.1, 0.03, 0.17, 0};
  const std::string tuned = PhaseLine(e);
  EXPECT_NE(tuned.find("at 1.100 GB/s [1.050, 1.160] (initial 1.000 GB/s "
                       "[0.960, 1.040], estimated gain +10.0% [+3.0, +17.0])"),
            std::string::npos)
      << tuned;
  // Nothing beat the initial configuration beyond noise: it says so and
  // claims no gain.
  e.kept_initial = true;
  e.estimate = e.reference;
  e.score = e.estimate.mean;
  e.gain = {0, 0, 0, 0};
  const std::string kept = PhaseLine(e);
  EXPECT_NE(kept.find("no knob beat the default beyond noise; kept the "
                      "initial"),
            std::string::npos)
      << kept;
  EXPECT_EQ(kept.find("gain"), std::string::npos) << kept;
}

TEST(StderrLogSink, RetuneLineSaysWhichWayTheScoreMovedFromTheFrozenMedian) {
  PhaseChangeEvent e;
  e.from = AutotunePhase::kFrozen;
  e.to = AutotunePhase::kRetuning;
  e.reference_score = 1e9;
  e.score = 0.5e9;
  const std::string fell = PhaseLine(e);
  EXPECT_NE(fell.find("score fell from 1.000 GB/s to 0.500 GB/s (-50.0%"),
            std::string::npos)
      << fell;
  e.score = 1.6e9;
  const std::string rose = PhaseLine(e);
  EXPECT_NE(rose.find("score rose from 1.000 GB/s to 1.600 GB/s (+60.0%"),
            std::string::npos)
      << rose;
}

}  // namespace
}  // namespace hvdtune::internal
