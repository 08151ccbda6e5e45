// The conditions a job froze under, read back from its stored samples
// (root/sinks/stored_conditions.h): the splitting rule on sample lists, and the
// config store's lookup on a real SQLite file handing them to the tuner.
#include "root/sinks/stored_conditions.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "hvdtune/services.h"
#include "hvdtune/store/store.h"
#include "hvdtune/store_mapping.h"
#include "root/sinks/config_store.h"

namespace hvdtune::internal {
namespace {

store::KnobValues Values(double fusion_mib) {
  KnobSettings k;
  k.Set(KnobId::kFusionThreshold, fusion_mib * 1024 * 1024);
  return ToStored(k);
}

// An empty directory of this process for a store file.
std::filesystem::path FreshDir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("hvdtune_conditions_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Appends samples `first`, first + 1, ... of one run in `phase`.
void Add(std::vector<store::Sample>& out, int first, int count,
         const std::string& phase, const store::KnobValues& values,
         double score) {
  for (int i = 0; i < count; ++i) {
    out.push_back({first + i, phase, values, score * (1 + 0.01 * (i % 3 - 1)),
                   static_cast<double>(out.size())});
  }
}

// One run on a fast link frozen on A whose link then slowed to a third: the
// frozen samples that re-tuned, a re-tune, then frozen on B.
std::vector<store::Sample> DriftRun(const store::KnobValues& a,
                                    const store::KnobValues& b) {
  std::vector<store::Sample> s;
  Add(s, 1, 1, "warmup", Values(64), 5e9);
  Add(s, 2, 4, "exploring", Values(8), 6e9);
  Add(s, 6, 8, "frozen", a, 9e9);
  Add(s, 14, 3, "frozen", a, 3e9);  // what the re-tune was about
  Add(s, 17, 4, "retuning", Values(2), 2.5e9);
  Add(s, 21, 6, "frozen", b, 4e9);
  return s;
}

TEST(StoredConditions, FrozenSegmentsNewestFirstWithoutTheDriftThatEndedOne) {
  const store::KnobValues a = Values(32), b = Values(4);
  const std::vector<StoredCondition> c =
      SplitStoredConditions(DriftRun(a, b), nullptr);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].values, b);
  EXPECT_EQ(c[0].scores.size(), 6u);
  EXPECT_EQ(c[1].values, a);
  // The 3 slow samples that triggered the re-tune are not A's condition.
  ASSERT_EQ(c[1].scores.size(), 8u);
  for (double x : c[1].scores) EXPECT_GT(x, 8e9);
}

TEST(StoredConditions,
     RunsAndGapsSplitSegmentsAndEachConfigurationKeepsItsNewest) {
  const store::KnobValues a = Values(32), b = Values(4), c = Values(16),
                          d = Values(1), e = Values(128);
  std::vector<store::Sample> s = DriftRun(a, b);
  // A second run confirmed A at full speed: its index starts again, so its
  // frozen samples are a segment of their own even though the last run's
  // ended on index 26 and this one reaches it.
  Add(s, 1, 2, "warmup", a, 9e9);
  Add(s, 3, 5, "frozen", a, 9.5e9);
  // Index reset straight into frozen samples of the same configuration.
  Add(s, 1, 2, "frozen", a, 7e9);
  // A gap (a lost sample) splits C's samples; the newer part is kept.
  Add(s, 3, 3, "frozen", c, 2e9);
  Add(s, 7, 2, "frozen", c, 2.2e9);
  Add(s, 9, 1, "frozen", d, 1e9);
  Add(s, 10, 2, "frozen", e, 0);  // no positive score: not a condition

  std::vector<StoredCondition> got = SplitStoredConditions(s, nullptr);
  ASSERT_EQ(got.size(), 4u);  // at most 4
  EXPECT_EQ(got[0].values, d);
  EXPECT_EQ(got[1].values, c);
  EXPECT_EQ(got[1].scores.size(), 2u);
  EXPECT_NEAR(got[1].scores[1], 2.2e9, 1e8);
  EXPECT_EQ(got[2].values, a);  // the newest segment of A: the reset one
  EXPECT_EQ(got[2].scores.size(), 2u);
  EXPECT_EQ(got[3].values, b);

  // The stored best comes first, its newest segment with it.
  store::Best best;
  best.values = b;
  best.score = 4e9;
  got = SplitStoredConditions(s, &best, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].values, b);
  EXPECT_EQ(got[0].scores.size(), 6u);
  EXPECT_EQ(got[1].values, d);
  EXPECT_EQ(got[2].values, c);
  // A best none of the samples froze on: its stored score alone.
  best.values = Values(256);
  got = SplitStoredConditions(s, &best);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].values, best.values);
  EXPECT_EQ(got[0].scores, std::vector<double>{4e9});
}

// A store file of this process for a 2-rank job training `step`: what
// earlier runs wrote (Write), and what a job of it gets at start (Lookup).
class JobStore {
 public:
  JobStore(const std::string& name, std::vector<StepTensor> step)
      : dir_(FreshDir(name)), step_(std::move(step)) {
    info_.size = 2;
    info_.local_size = 2;
  }
  ~JobStore() { std::filesystem::remove_all(dir_); }

  // Calls fill(db, hardware id, model id) on the open store.
  template <typename Fill>
  void Write(Fill fill) {
    store::Store db(store::StoreOptions{Path()});
    const std::int64_t hw = db.PutFingerprint(
        "hardware",
        JobHardwareFingerprint(info_.size, info_.local_size, info_.cross_size));
    const std::int64_t model =
        db.PutFingerprint("model", StepModelFingerprint(step_));
    fill(db, hw, model);
  }

  ConfigSource::WarmStart Lookup() {
    ConfigStoreService service(Path(), AutotuneStoreMode::kAuto);
    ConfigSource::WarmStart warm = service.Lookup(info_, step_);
    service.OnStop();
    return warm;
  }

 private:
  std::string Path() const { return (dir_ / "store.db").string(); }
  std::filesystem::path dir_;
  std::vector<StepTensor> step_;
  RuntimeInfo info_;
};

void SetBest(store::Store& db, std::int64_t hw, std::int64_t model,
             const KnobSettings& k, double score, std::int64_t run) {
  store::Best best;
  best.values = ToStored(k);
  best.score = score;
  best.run = run;
  best.time = 2.0;
  db.SetBest(hw, model, best);
}

TEST(StoredConditions, TheStoreLookupHandsBothConditionsToTheTuner) {
  KnobSettings a, b;
  a.Set(KnobId::kFusionThreshold, 32 << 20);
  b.Set(KnobId::kFusionThreshold, 4 << 20);
  JobStore job("lookup",
               {{DataType::kFloat32, 4096}, {DataType::kFloat32, 1 << 20}});
  job.Write([&](store::Store& db, std::int64_t hw, std::int64_t model) {
    // What a run that drifted from A (fast) to B (slow) leaves behind.
    const std::int64_t run = db.BeginRun(hw, model, "test", "fresh", 1.0);
    db.AddSamples(run, DriftRun(ToStored(a), ToStored(b)));
    SetBest(db, hw, model, b, 4e9, run);
    db.EndRun(run, "completed", 3.0);
  });
  const ConfigSource::WarmStart warm = job.Lookup();

  EXPECT_EQ(warm.source, "store");
  ASSERT_TRUE(warm.best.has_value());
  EXPECT_EQ(warm.best->values, b);
  ASSERT_EQ(warm.conditions.size(), 2u);
  EXPECT_EQ(warm.conditions[0].values, b);
  EXPECT_EQ(warm.conditions[0].scores.size(), 6u);
  EXPECT_EQ(warm.conditions[1].values, a);
  EXPECT_EQ(warm.conditions[1].scores.size(), 8u);
  for (double x : warm.conditions[1].scores) EXPECT_GT(x, 8e9);
}

// Two jobs of one model on one cluster that ran at once (a sweep, or a
// job and its neighbour), frozen on different configurations: their
// samples interleave in the store, and each still makes its condition.
TEST(StoredConditions, JobsThatWroteAtOnceEachMakeTheirCondition) {
  KnobSettings a, b;
  a.Set(KnobId::kFusionThreshold, 32 << 20);
  b.Set(KnobId::kFusionThreshold, 4 << 20);
  JobStore job("interleaved", {{DataType::kFloat32, 1 << 20}});
  job.Write([&](store::Store& db, std::int64_t hw, std::int64_t model) {
    const std::int64_t first = db.BeginRun(hw, model, "test", "fresh", 1.0);
    const std::int64_t second = db.BeginRun(hw, model, "test", "fresh", 1.5);
    std::vector<store::Sample> one, two;
    Add(one, 6, 8, "frozen", ToStored(a), 9e9);
    Add(two, 4, 6, "frozen", ToStored(b), 3e9);
    // One sample at a time, in turn, as two jobs' writers commit them.
    for (std::size_t i = 0; i < std::max(one.size(), two.size()); ++i) {
      if (i < one.size()) db.AddSamples(first, {one[i]});
      if (i < two.size()) db.AddSamples(second, {two[i]});
    }
    SetBest(db, hw, model, a, 9e9, first);
    db.EndRun(first, "completed", 3.0);
    db.EndRun(second, "completed", 3.0);
  });
  const ConfigSource::WarmStart warm = job.Lookup();

  // The stored best's condition first, then the other job's; each with
  // all its frozen samples.
  ASSERT_EQ(warm.conditions.size(), 2u);
  EXPECT_EQ(warm.conditions[0].values, a);
  EXPECT_EQ(warm.conditions[0].scores.size(), 8u);
  EXPECT_EQ(warm.conditions[1].values, b);
  EXPECT_EQ(warm.conditions[1].scores.size(), 6u);
}

// A made-up job on a fast link: 1 GB/s at a 16 MiB fusion threshold and
// 2 ms cycles, less elsewhere; +-2% noise.
double FastLink(const KnobSettings& k, std::uint64_t* rng) {
  const double f =
      std::log2(static_cast<double>(k.fusion_threshold_bytes()) / (16 << 20));
  const double c = std::log2(k.cycle_time_ms() / 2.0);
  *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
  const double u = static_cast<double>(*rng >> 11) / 9007199254740992.0;
  return 1e9 * std::exp(-0.08 * f * f - 0.3 * c * c) * (0.98 + 0.04 * u);
}

TEST(StoredConditions, BackOnTheFastLinkTheAutotunerFreezesOnItsConfiguration) {
  // The last run froze on A on the fast link, the link slowed to half, it
  // re-tuned and froze on B (the stored best). This run is on the fast
  // link again: B scores twice its stored scores, A confirms.
  const std::filesystem::path dir = FreshDir("tuner");
  const std::string path = (dir / "store.db").string();
  KnobSettings a, b;
  a.Set(KnobId::kFusionThreshold, 16 << 20);
  a.Set(KnobId::kCycleTime, 2.0);
  b.Set(KnobId::kFusionThreshold, 4 << 20);
  b.Set(KnobId::kCycleTime, 1.0);
  std::uint64_t rng = 3;
  const double b_fast = FastLink(b, &rng);
  ASSERT_LT(b_fast, 0.6e9);

  TuningContext ctx;
  ctx.settings.enabled = true;
  ctx.settings.steps_per_sample = 3;
  ctx.settings.warmup_samples = 2;
  ctx.settings.sample_precision = 0;
  ctx.settings.max_samples = 10;
  const TensorEvent probe;
  {
    store::Store db(store::StoreOptions{path});
    const std::int64_t hw = db.PutFingerprint(
        "hardware", JobHardwareFingerprint(ctx.info.size, ctx.info.local_size,
                                           ctx.info.cross_size));
    const std::vector<StepTensor> step = {{probe.dtype, 100000000}};
    const std::int64_t model =
        db.PutFingerprint("model", StepModelFingerprint(step));
    const std::int64_t run = db.BeginRun(hw, model, "test", "fresh", 1.0);
    std::vector<store::Sample> s;
    Add(s, 1, 2, "warmup", ToStored(KnobSettings()), 0.7e9);
    Add(s, 3, 10, "exploring", Values(64), 0.8e9);
    Add(s, 13, 8, "frozen", ToStored(a), 1e9);
    Add(s, 21, 2, "frozen", ToStored(a), 0.5e9);
    Add(s, 23, 5, "retuning", Values(8), 0.4e9);
    Add(s, 28, 8, "frozen", ToStored(b), 0.5 * b_fast);
    db.AddSamples(run, s);
    store::Best best;
    best.values = ToStored(b);
    best.score = 0.5 * b_fast;
    best.run = run;
    db.SetBest(hw, model, best);
    db.EndRun(run, "completed", 3.0);
  }
  auto service =
      std::make_shared<ConfigStoreService>(path, AutotuneStoreMode::kAuto);
  ctx.config_source = service;
  auto tuner = MakeGpAutotuner(ctx);

  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  KnobSettings knobs;
  std::vector<KnobSettings> applied;
  std::vector<PhaseChangeEvent> phases;
  double now = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < 2000 && std::chrono::steady_clock::now() < deadline;
       ++i) {
    now += 1e8 / FastLink(knobs, &rng);
    TensorEvent e;
    e.name = "g";
    e.bytes = 100000000;
    e.finished = now;
    tuner->OnTensor(e);
    Autotuner::Output out = tuner->Poll(now);
    if (out.update) {
      knobs = *out.update;
      applied.push_back(knobs);
    }
    for (auto& p : out.phase_changes) phases.push_back(p);
    if (tuner->status().phase != AutotunePhase::kWarmup) break;
  }
  std::cerr.rdbuf(old);
  service->OnStop();
  std::filesystem::remove_all(dir);

  const AutotuneStatus st = tuner->status();
  EXPECT_EQ(st.source, "store");
  EXPECT_EQ(st.phase, AutotunePhase::kFrozen);
  EXPECT_EQ(st.samples, 0);
  ASSERT_EQ(applied.size(), 2u);  // B, then A
  EXPECT_EQ(applied[0].fusion_threshold_bytes(), b.fusion_threshold_bytes());
  EXPECT_EQ(applied[1].fusion_threshold_bytes(), a.fusion_threshold_bytes());
  EXPECT_EQ(knobs.fusion_threshold_bytes(), a.fusion_threshold_bytes());
  EXPECT_EQ(knobs.cycle_time_ms(), a.cycle_time_ms());
  ASSERT_FALSE(phases.empty());
  EXPECT_EQ(phases.back().to, AutotunePhase::kFrozen);
  EXPECT_NE(
      captured.str().find("confirmed the stored best of condition 2 of 2"),
      std::string::npos)
      << captured.str();
}

}  // namespace
}  // namespace hvdtune::internal
