#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "hvdtune/tuner/autotune_policy.h"
#include "policy_test_util.h"
#include "test_functions.h"

// The frozen phase's drift detector: re-tunes on a lasting change of the
// score in either direction, and never on noise or on a change smaller than
// retune_drop.
namespace hvdtune::tuner {
namespace {

using namespace testing_policy;

TEST(AutotunePolicyDriftTest, SustainedDropReopensTuningThenFreezesAgain) {
  AutotunePolicySettings s = Settings();
  s.max_samples = 6;
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), Start(), s);
  Caller caller(policy, PoorStart());
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  // A few healthy frozen samples, then the job runs at half speed.
  caller.RunUntil([] { return false; }, 20);
  EXPECT_EQ(policy.status().phase, Phase::kFrozen);
  EXPECT_EQ(policy.status().retunes, 0);
  caller.set_slowdown(0.5);
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kRetuning, 40));
  // Two degraded samples (retune_windows) re-open tuning.
  const std::vector<PolicyEvent> frozen = caller.Samples(Phase::kFrozen);
  ASSERT_GE(frozen.size(), 3u);
  const PolicyEvent retune = caller.Events(Kind::kPhaseChange).back();
  EXPECT_EQ(retune.previous_phase, Phase::kFrozen);
  EXPECT_EQ(retune.phase, Phase::kRetuning);
  EXPECT_EQ(retune.score, frozen.back().score);
  EXPECT_EQ(policy.status().retunes, 1);

  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  // max(4, 6 / 2) samples, the incumbent's counting as the first.
  EXPECT_EQ(caller.Samples(Phase::kRetuning).size(), 3u);
  EXPECT_EQ(policy.status().exploration_samples, 6 + 3);
  EXPECT_EQ(caller.Changes(), (Changes{{Phase::kOff, Phase::kWarmup},
                                       {Phase::kWarmup, Phase::kExploring},
                                       {Phase::kExploring, Phase::kFrozen},
                                       {Phase::kFrozen, Phase::kRetuning},
                                       {Phase::kRetuning, Phase::kFrozen}}));
  // Stays frozen at the new, slower level.
  caller.RunUntil([] { return false; }, 60);
  EXPECT_EQ(policy.status().phase, Phase::kFrozen);
  EXPECT_EQ(policy.status().retunes, 1);
  ExpectContiguousIndices(caller);
}

// A shared machine's step times: log-normal with a 20% sd (a sample of
// three steps then spans about 2x over a few dozen samples, as measured on
// a busy 2-core machine), and one step in 100 three times slower.
double SharedMachineNoise(std::mt19937_64& rng) {
  std::lognormal_distribution<double> spread(0.0, 0.2);
  std::bernoulli_distribution stall(0.01);
  return spread(rng) / (stall(rng) ? 3.0 : 1.0);
}

// A job frozen under SharedMachineNoise, with the default retune_windows.
struct NoisyFrozenJob {
  static AutotunePolicySettings NoisySettings() {
    AutotunePolicySettings s = Settings();
    s.max_samples = 6;
    s.retune_windows = 3;
    return s;
  }
  AutotunePolicy policy{tt::CollectiveThroughput::Space(), Start(),
                        NoisySettings()};
  Caller caller{policy, PoorStart()};
  NoisyFrozenJob() {
    caller.set_noise(SharedMachineNoise);
    EXPECT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  }
};

TEST(AutotunePolicyDriftTest, NoRetuneOnNoiseAlone) {
  NoisyFrozenJob job;
  // 3,000 frozen samples with nothing changed: no re-tune.
  job.caller.RunUntil([] { return false; }, 3 * 3000);
  EXPECT_EQ(job.policy.status().phase, Phase::kFrozen);
  EXPECT_EQ(job.policy.status().retunes, 0);
}

TEST(AutotunePolicyDriftTest, NoRetuneOnALoadedMachinesDips) {
  // Quiet steps (+-2%), but one sample in five dips 20% as a whole (a
  // neighbour's burst as long as a sample), at random, so that now and then
  // two or three dips follow each other. Measured in the median absolute
  // deviation, which ignores the dips, each would count 4 spreads; the
  // reference's slow tail makes them what they are: this job's noise.
  AutotunePolicy policy{tt::CollectiveThroughput::Space(), Start(),
                        NoisyFrozenJob::NoisySettings()};
  Caller caller{policy, PoorStart()};
  std::bernoulli_distribution dip(0.2);
  std::uniform_real_distribution<double> quiet(0.98, 1.02);
  int step = 0;
  bool dipping = false;
  caller.set_noise([&](std::mt19937_64& rng) {
    if (step++ % 3 == 0) dipping = dip(rng);  // a sample is 3 steps
    return quiet(rng) * (dipping ? 0.8 : 1.0);
  });
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  caller.RunUntil([] { return false; }, 3 * 3000);
  EXPECT_EQ(policy.status().retunes, 0);
  // A lasting drop as deep as the dips is still found.
  caller.set_slowdown(0.6);
  EXPECT_TRUE(caller.RunUntilPhase(Phase::kRetuning, 3 * 20));
}

TEST(AutotunePolicyDriftTest, NoisyJobDetectsAHalvingWithinRetuneWindows) {
  NoisyFrozenJob job;
  job.caller.RunUntil([] { return false; }, 3 * 40);
  ASSERT_EQ(job.policy.status().retunes, 0);
  const int before = job.policy.status().total_samples;
  job.caller.set_slowdown(0.5);  // the link got slower
  ASSERT_TRUE(job.caller.RunUntilPhase(Phase::kRetuning, 3 * 20));
  // A halving is 3.5 spreads of this noise: detected at the third sample
  // (a fourth when the change falls inside a sample).
  EXPECT_LE(job.policy.status().total_samples - before, 4);
}

TEST(AutotunePolicyDriftTest, NoRetuneWhenDropIsZero) {
  AutotunePolicySettings s = Settings();
  s.max_samples = 4;
  s.retune_drop = 0;
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), Start(), s);
  Caller caller(policy, PoorStart());
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  caller.set_slowdown(0.1);
  caller.RunUntil([] { return false; }, 100);
  EXPECT_EQ(policy.status().phase, Phase::kFrozen);
  EXPECT_EQ(policy.status().retunes, 0);
}

// Quiet steps (+-2%) and the default retune_drop of 15%.
struct QuietFrozenJob {
  AutotunePolicy policy{tt::CollectiveThroughput::Space(), Start(),
                        NoisyFrozenJob::NoisySettings()};
  Caller caller{policy, PoorStart()};
  QuietFrozenJob() {
    caller.set_noise([](std::mt19937_64& rng) {
      return std::uniform_real_distribution<double>(0.98, 1.02)(rng);
    });
    EXPECT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
    caller.RunUntil([] { return false; }, 3 * 40);
    EXPECT_EQ(policy.status().retunes, 0);
  }
};

TEST(AutotunePolicyDriftTest, ALastingChangeSmallerThanRetuneDropNeverRetunes) {
  // A quiet job: 10% is five of its spreads, and a CUSUM with a slack of
  // one spread would add up such a drop (a neighbour's steady load) until
  // it re-tuned. retune_drop (15%) says such a change is not worth a
  // re-tune, however long it lasts.
  for (double level : {0.9, 1.1}) {
    QuietFrozenJob job;
    job.caller.set_slowdown(level);
    job.caller.RunUntil([] { return false; }, 3 * 2000);
    EXPECT_EQ(job.policy.status().phase, Phase::kFrozen) << level;
    EXPECT_EQ(job.policy.status().retunes, 0) << level;
  }
}

TEST(AutotunePolicyDriftTest, ALastingRiseRetunesAndSaysFromWhere) {
  // The link got faster: the configuration was chosen for slower
  // conditions, and another may now be best.
  QuietFrozenJob job;
  const double frozen = job.caller.Samples(Phase::kFrozen).back().score;
  const int before = job.policy.status().total_samples;
  job.caller.set_slowdown(2.0);
  ASSERT_TRUE(job.caller.RunUntilPhase(Phase::kRetuning, 3 * 20));
  // At the retune_windows-th sample (3), a fourth when the change falls
  // inside a sample.
  EXPECT_LE(job.policy.status().total_samples - before, 4);
  const PolicyEvent retune = job.caller.Events(Kind::kPhaseChange).back();
  EXPECT_EQ(retune.phase, Phase::kRetuning);
  EXPECT_GT(retune.score, 1.8 * retune.reference);
  EXPECT_NEAR(retune.reference, frozen, 0.05 * frozen);
}

TEST(AutotunePolicyDriftTest, AChangeBeyondRetuneDropIsFoundInEitherDirection) {
  // 25% down or 33% up: beyond retune_drop, within a few samples.
  for (double level : {0.75, 1.33}) {
    QuietFrozenJob job;
    const int before = job.policy.status().total_samples;
    job.caller.set_slowdown(level);
    ASSERT_TRUE(job.caller.RunUntilPhase(Phase::kRetuning, 3 * 20)) << level;
    EXPECT_LE(job.policy.status().total_samples - before, 4) << level;
  }
}

TEST(AutotunePolicyDriftTest, ARetuneGoesOnFromWhatTheLastRoundLearned) {
  // Every configuration slows alike (the surface keeps its shape). The
  // re-tune carries the last round's samples over, scaled by how far the
  // incumbent moved, and goes on refining from them: it never freezes on
  // anything worse than before, and in some seeds on something better (a
  // fresh model with half the budget keeps the incumbent: 0 of 10).
  int worse = 0;
  int better = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    AutotunePolicySettings s = Settings();
    s.seed = seed;
    AutotunePolicy policy(tt::CollectiveThroughput::Space(), Start(), s);
    Caller caller(policy, PoorStart());
    ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
    const double before = Throughput(policy.status().best);
    caller.RunUntil([] { return false; }, 3 * 10);
    caller.set_slowdown(0.5);
    ASSERT_TRUE(caller.RunUntilPhase(Phase::kRetuning, 3 * 20));
    ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
    const double after = Throughput(policy.status().best);
    worse += after < 0.99 * before;
    better += after > 1.01 * before;
  }
  EXPECT_EQ(worse, 0);
  EXPECT_GE(better, 1);
}

}  // namespace
}  // namespace hvdtune::tuner
