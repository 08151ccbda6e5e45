// AutotunePolicy starting from what earlier runs left: priors that shape
// the search, a known best confirmed or explored past, and the freeze rule
// that keeps knobs this run is not confident about.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "policy_test_util.h"

namespace hvdtune::tuner {
namespace {

using namespace testing_policy;

// Samples until the configuration in force is within 5% of `target`.
int SamplesToReach(AutotunePolicy& policy, double target) {
  Caller caller(policy, PoorStart());
  caller.RunUntil([&] {
    return Throughput(caller.in_force()) >= 0.95 * target ||
           policy.status().phase == Phase::kFrozen;
  });
  return policy.status().exploration_samples;
}

TEST(AutotunePolicyTest, PriorsShapeTheSearch) {
  AutotunePolicySettings s = Settings();
  s.max_samples = 20;
  const std::vector<PriorSample> grid = GridPriors(1e9);
  // The best of the grid is the target: a good configuration.
  const double target = grid.front().score / 1e9;
  AutotunePolicy without(tt::CollectiveThroughput::Space(), Start(), s);
  PolicyStart start = Start();
  start.priors = grid;
  AutotunePolicy with(tt::CollectiveThroughput::Space(), start, s);
  const int samples_without = SamplesToReach(without, target);
  const int samples_with = SamplesToReach(with, target);
  std::printf(
      "samples to within 5%% of the grid best: %d without priors, %d "
      "with %zu priors\n",
      samples_without, samples_with, grid.size());
  EXPECT_LT(samples_with, samples_without);
  EXPECT_LE(samples_with, 3);
}

TEST(AutotunePolicyTest, FreezesOnlyOnWhatThisRunMeasured) {
  // Priors from a run on another scale (1000x higher scores) would win any
  // comparison of raw scores; the policy must not freeze on one unmeasured.
  AutotunePolicySettings s = Settings();
  s.max_samples = 6;
  PolicyStart start = Start();
  start.priors = GridPriors(1e12);
  start.priors.resize(8);
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, s);
  Caller caller(policy, PoorStart());
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  const PolicyStatus st = policy.status();
  std::vector<Config> measured = {PoorStart()};
  for (const PolicyEvent& e : caller.Events(Kind::kSample)) {
    measured.push_back(e.config);
  }
  EXPECT_NE(std::find(measured.begin(), measured.end(), st.best),
            measured.end());
  EXPECT_LT(st.best_score, 1e11);  // this run's scale
}

TEST(AutotunePolicyTest, ChangesFromTheInitialConfigurationMustBeConfident) {
  // A change the model is this sure of does not exist: every knob goes back
  // to its value in the initial configuration. With the default confidence
  // the clearly better configurations of the surface are kept.
  for (double confidence : {1e6, AutotunePolicySettings{}.freeze_confidence}) {
    AutotunePolicySettings s = Settings();
    s.freeze_confidence = confidence;
    AutotunePolicy policy(tt::CollectiveThroughput::Space(), Start(), s);
    Caller caller(policy, PoorStart());
    ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
    const PolicyStatus st = policy.status();
    if (confidence > 1) {
      EXPECT_EQ(st.best, PoorStart());
    } else {
      EXPECT_NE(st.best, PoorStart());
      EXPECT_GT(Throughput(st.best), 1.5 * Throughput(PoorStart()));
    }
  }
}

TEST(AutotunePolicyTest, KnownBestConfirmedFreezesWithoutExploring) {
  const std::vector<PriorSample> grid = GridPriors(1e9);
  PolicyStart start = Start();
  start.known_best = grid.front().config;
  start.known_best_score = grid.front().score;
  start.confirm_samples = 2;
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, Settings());
  // Applied at once.
  const std::optional<Config> first = policy.TakeConfig();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, *start.known_best);
  Caller caller(policy, *first);
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  const PolicyStatus st = policy.status();
  EXPECT_EQ(st.exploration_samples, 0);
  EXPECT_EQ(st.total_samples, 2);
  EXPECT_EQ(st.best, *start.known_best);
  EXPECT_TRUE(caller.applied().empty());  // nothing else to apply
  const std::vector<PolicyEvent> confirm = caller.Samples(Phase::kWarmup);
  ASSERT_EQ(confirm.size(), 2u);
  for (const PolicyEvent& e : confirm) EXPECT_EQ(e.config, *start.known_best);
  EXPECT_EQ(st.best_score, 0.5 * (confirm[0].score + confirm[1].score));
  EXPECT_EQ(caller.Changes(), (Changes{{Phase::kOff, Phase::kWarmup},
                                       {Phase::kWarmup, Phase::kFrozen}}));
  // It may still re-tune on a sustained drop.
  caller.RunUntil([] { return false; }, 12);
  caller.set_slowdown(0.5);
  EXPECT_TRUE(caller.RunUntilPhase(Phase::kRetuning, 100));
}

TEST(AutotunePolicyTest, KnownBestThatScoresLowExplores) {
  const std::vector<PriorSample> grid = GridPriors(1e9);
  PolicyStart start = Start();
  start.known_best = grid[20].config;  // mediocre
  start.known_best_score = 2 * grid.front().score;
  AutotunePolicySettings s = Settings();
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, s);
  const std::optional<Config> first = policy.TakeConfig();
  ASSERT_TRUE(first.has_value());
  Caller caller(policy, *first);
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kExploring));
  EXPECT_EQ(policy.status().total_samples, start.confirm_samples);
  EXPECT_EQ(policy.status().exploration_samples, 1);
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  EXPECT_EQ(policy.status().exploration_samples, s.max_samples);
  EXPECT_GE(Throughput(policy.status().best), Throughput(*start.known_best));
  EXPECT_EQ(caller.Changes(), (Changes{{Phase::kOff, Phase::kWarmup},
                                       {Phase::kWarmup, Phase::kExploring},
                                       {Phase::kExploring, Phase::kFrozen}}));
  ExpectContiguousIndices(caller);
}

TEST(AutotunePolicyTest, ConfirmationAllowsTheStoredRunsOwnSpread) {
  // The stored run measured its best 12 times; this run is 25% slower (a
  // busier machine). Where the stored samples varied by 15%, that is
  // within their noise: confirmed, no exploration. Where they varied by 1%,
  // 25% is a change: it explores.
  for (double spread : {0.15, 0.01}) {
    const Config best = GridPriors(1e9).front().config;
    PolicyStart start = Start();
    start.known_best = best;
    std::mt19937_64 rng(3);
    std::lognormal_distribution<double> noise(0.0, spread);
    for (int i = 0; i < 12; ++i) {
      start.priors.push_back({best, Throughput(best) * 1e9 * noise(rng)});
    }
    start.known_best_score = start.priors.front().score;
    AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, Settings());
    const std::optional<Config> first = policy.TakeConfig();
    ASSERT_TRUE(first.has_value());
    Caller caller(policy, *first);
    caller.set_slowdown(0.75);
    caller.RunUntil([&] { return policy.status().phase != Phase::kWarmup; });
    if (spread > 0.1) {
      EXPECT_EQ(policy.status().phase, Phase::kFrozen);
      EXPECT_EQ(policy.status().exploration_samples, 0);
    } else {
      EXPECT_EQ(policy.status().phase, Phase::kExploring);
    }
  }
}

TEST(AutotunePolicyTest, FreezeOnKnownBestNeverTunes) {
  const std::vector<PriorSample> grid = GridPriors(1e9);
  PolicyStart start = Start();
  start.known_best = grid[3].config;
  start.known_best_score = grid[3].score;
  start.freeze_on_known_best = true;
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), start,
                        Settings(/*asynchronous=*/true));
  EXPECT_EQ(policy.status().phase, Phase::kFrozen);
  EXPECT_EQ(policy.status().best, *start.known_best);
  EXPECT_EQ(policy.status().best_score, start.known_best_score);
  const std::vector<PolicyEvent> events = policy.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kPhaseChange);
  EXPECT_EQ(events[0].previous_phase, Phase::kOff);
  EXPECT_EQ(events[0].phase, Phase::kFrozen);
  EXPECT_EQ(events[0].config, *start.known_best);
  const std::optional<Config> first = policy.TakeConfig();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, *start.known_best);
  Caller caller(policy, *first);
  caller.set_slowdown(0.3);  // a drop that would re-tune otherwise
  caller.RunUntil([] { return false; }, 200);
  EXPECT_EQ(policy.status().phase, Phase::kFrozen);
  EXPECT_EQ(policy.status().retunes, 0);
  EXPECT_TRUE(caller.applied().empty());
  EXPECT_GE(caller.Samples(Phase::kFrozen).size(), 10u);  // monitored
}

// Two conditions from the store, newest first: the last run ended on a link
// at half speed frozen on B (a poor one at full speed), the run
// before it ran at full speed frozen on A (the grid's best). Each recorded
// 8 frozen samples within 1% of one another.
PolicyStart TwoConditions(Config* a, Config* b) {
  const std::vector<PriorSample> grid = GridPriors(1e9);
  *a = grid.front().config;
  // B: the first configuration of the grid well below A at full speed.
  *b = std::find_if(grid.begin(), grid.end(), [&](const PriorSample& p) {
         return Throughput(p.config) < 0.6 * Throughput(*a);
       })->config;
  PolicyStart start = Start();
  auto scores = [](const Config& c, double speed) {
    std::vector<double> out;
    for (int i = 0; i < 8; ++i) {
      out.push_back(Throughput(c) * 1e9 * speed * (1 + 0.01 * (i % 3 - 1)));
    }
    return out;
  };
  start.conditions = {{*b, scores(*b, 0.5)}, {*a, scores(*a, 1.0)}};
  // What the runtime passes too: the stored best (B) and its samples.
  start.known_best = *b;
  start.known_best_score = Throughput(*b) * 1e9 * 0.5;
  for (const KnownCondition& c : start.conditions) {
    for (double x : c.scores) start.priors.push_back({c.config, x});
  }
  return start;
}

TEST(AutotunePolicyConditionsTest,
     FullSpeedConfirmsTheOlderConditionAfterTheNewestFails) {
  Config a, b;
  const PolicyStart start = TwoConditions(&a, &b);
  ASSERT_GT(Throughput(a), 1.5 * Throughput(b));
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, Settings());
  const std::optional<Config> first = policy.TakeConfig();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, b);  // the stored best first
  Caller caller(policy, *first);
  ASSERT_TRUE(caller.RunUntil(
      [&] { return policy.status().phase != Phase::kWarmup; }, 200));
  const PolicyStatus st = policy.status();
  EXPECT_EQ(st.phase, Phase::kFrozen);
  EXPECT_EQ(st.best, a);
  EXPECT_EQ(st.exploration_samples, 0);
  EXPECT_EQ(st.total_samples, 4);
  EXPECT_EQ(caller.applied(), (std::vector<Config>{a}));
  const std::vector<PolicyEvent> confirm = caller.Samples(Phase::kWarmup);
  ASSERT_EQ(confirm.size(), 4u);
  // B scored about twice what it scored at half speed: above its stored
  // scores, which says the conditions differ as much as a drop would.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(confirm[i].config, b);
    EXPECT_GT(confirm[i].score, 1.8 * start.conditions[0].scores[0]);
  }
  for (int i = 2; i < 4; ++i) EXPECT_EQ(confirm[i].config, a);
  // The initial score is the stored best's confirmation; A beats it.
  EXPECT_NEAR(st.initial_score, 0.5 * (confirm[0].score + confirm[1].score),
              1e-6 * st.initial_score);
  EXPECT_NEAR(st.best_score, 0.5 * (confirm[2].score + confirm[3].score),
              1e-6 * st.best_score);
  const std::vector<PolicyEvent> changes = caller.Events(Kind::kPhaseChange);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[1].phase, Phase::kFrozen);
  EXPECT_EQ(changes[1].config, a);
  EXPECT_EQ(changes[1].condition, 2);
  EXPECT_EQ(changes[1].conditions, 2);
  ExpectContiguousIndices(caller);
}

TEST(AutotunePolicyConditionsTest, HalfSpeedConfirmsTheNewestCondition) {
  Config a, b;
  const PolicyStart start = TwoConditions(&a, &b);
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, Settings());
  const std::optional<Config> first = policy.TakeConfig();
  ASSERT_TRUE(first.has_value());
  Caller caller(policy, *first);
  caller.set_slowdown(0.5);
  ASSERT_TRUE(caller.RunUntil(
      [&] { return policy.status().phase != Phase::kWarmup; }, 200));
  const PolicyStatus st = policy.status();
  EXPECT_EQ(st.phase, Phase::kFrozen);
  EXPECT_EQ(st.best, b);
  EXPECT_EQ(st.exploration_samples, 0);
  EXPECT_EQ(st.total_samples, 2);
  EXPECT_TRUE(caller.applied().empty());
  const std::vector<PolicyEvent> changes = caller.Events(Kind::kPhaseChange);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[1].condition, 1);
  EXPECT_EQ(changes[1].conditions, 2);
}

TEST(AutotunePolicyConditionsTest, AThirdSpeedConfirmsNeitherAndExplores) {
  Config a, b;
  const PolicyStart start = TwoConditions(&a, &b);
  AutotunePolicySettings s = Settings();
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, s);
  const std::optional<Config> first = policy.TakeConfig();
  ASSERT_TRUE(first.has_value());
  Caller caller(policy, *first);
  caller.set_slowdown(0.25);
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kExploring, 200));
  // Both confirmations were tried, and both count as the round's samples.
  EXPECT_EQ(policy.status().total_samples, 4);
  EXPECT_EQ(policy.status().exploration_samples, 2);
  const std::vector<PolicyEvent> confirm = caller.Samples(Phase::kWarmup);
  ASSERT_EQ(confirm.size(), 4u);
  EXPECT_EQ(confirm[0].config, b);
  EXPECT_EQ(confirm[3].config, a);
  EXPECT_NEAR(policy.status().initial_score,
              0.5 * (confirm[0].score + confirm[1].score),
              1e-6 * policy.status().initial_score);
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  EXPECT_EQ(policy.status().exploration_samples, s.max_samples);
  // It froze on something at least as good as the better of the two.
  EXPECT_GE(Throughput(policy.status().best), 0.95 * Throughput(a));
  for (const PolicyEvent& e : caller.Events(Kind::kPhaseChange)) {
    EXPECT_EQ(e.condition, 0);
  }
  EXPECT_EQ(caller.Changes(), (Changes{{Phase::kOff, Phase::kWarmup},
                                       {Phase::kWarmup, Phase::kExploring},
                                       {Phase::kExploring, Phase::kFrozen}}));
  ExpectContiguousIndices(caller);
}

TEST(AutotunePolicyConditionsTest, OneConditionKeepsTheOneSidedConfirmation) {
  // A single stored condition: a run twice as fast still confirms (the
  // stored best is only checked for a drop), as without conditions.
  Config a, b;
  PolicyStart start = TwoConditions(&a, &b);
  start.conditions.resize(1);
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, Settings());
  const std::optional<Config> first = policy.TakeConfig();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, b);
  Caller caller(policy, *first);
  ASSERT_TRUE(caller.RunUntil(
      [&] { return policy.status().phase != Phase::kWarmup; }, 200));
  EXPECT_EQ(policy.status().phase, Phase::kFrozen);
  EXPECT_EQ(policy.status().best, b);
  const std::vector<PolicyEvent> changes = caller.Events(Kind::kPhaseChange);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[1].condition, 1);
  EXPECT_EQ(changes[1].conditions, 1);
}

TEST(AutotunePolicyConditionsTest, AConditionWithoutAPositiveScoreIsRejected) {
  Config a, b;
  PolicyStart start = TwoConditions(&a, &b);
  start.conditions[1].scores = {0.0, -1.0};
  try {
    AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, Settings());
    FAIL() << "accepted a condition with no positive score";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("condition 2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hvdtune::tuner
