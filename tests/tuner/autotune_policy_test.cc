#include "hvdtune/tuner/autotune_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "policy_test_util.h"
#include "test_functions.h"

namespace hvdtune::tuner {
namespace {

using namespace testing_policy;

TEST(AutotunePolicyTest, PhaseNames) {
  EXPECT_STREQ(PhaseName(Phase::kOff), "off");
  EXPECT_STREQ(PhaseName(Phase::kWarmup), "warmup");
  EXPECT_STREQ(PhaseName(Phase::kExploring), "exploring");
  EXPECT_STREQ(PhaseName(Phase::kFrozen), "frozen");
  EXPECT_STREQ(PhaseName(Phase::kRetuning), "retuning");
}

TEST(AutotunePolicyTest, WarmsUpExploresAndFreezesAfterTheBudget) {
  const AutotunePolicySettings s = Settings();
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), Start(), s);
  EXPECT_EQ(policy.status().phase, Phase::kWarmup);
  EXPECT_FALSE(policy.TakeConfig().has_value());
  Caller caller(policy, PoorStart());

  // Warm-up: 3 samples of 3 steps under the initial configuration.
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kExploring));
  EXPECT_EQ(caller.steps(), 9);
  const std::vector<PolicyEvent> warmup = caller.Samples(Phase::kWarmup);
  ASSERT_EQ(warmup.size(), 3u);
  for (const PolicyEvent& e : warmup) EXPECT_EQ(e.config, PoorStart());
  EXPECT_EQ(policy.status().initial_score, warmup.back().score);
  EXPECT_EQ(policy.status().exploration_samples, 1);

  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  const PolicyStatus st = policy.status();
  // The budget counts the initial configuration's observation.
  EXPECT_EQ(st.exploration_samples, s.max_samples);
  EXPECT_EQ(caller.Samples(Phase::kExploring).size(),
            static_cast<std::size_t>(s.max_samples - 1));
  EXPECT_EQ(st.total_samples, 3 + s.max_samples - 1);
  // Each exploring sample: one straddling step skipped, then 3 scored.
  EXPECT_EQ(caller.steps(), 9 + (s.max_samples - 1) * 4);
  EXPECT_EQ(caller.Changes(), (Changes{{Phase::kOff, Phase::kWarmup},
                                       {Phase::kWarmup, Phase::kExploring},
                                       {Phase::kExploring, Phase::kFrozen}}));
  const PolicyEvent frozen = caller.Events(Kind::kPhaseChange).back();
  EXPECT_EQ(frozen.config, st.best);
  EXPECT_EQ(frozen.score, st.best_score);
  // The frozen configuration comes through TakeConfig() like any other.
  caller.Step();
  EXPECT_EQ(caller.in_force(), st.best);
  EXPECT_GT(Throughput(st.best), 1.5 * Throughput(PoorStart()));
  ExpectContiguousIndices(caller);

  // Frozen: samples are still scored and numbered, nothing changes.
  caller.RunUntil([] { return false; }, 40);
  EXPECT_EQ(policy.status().phase, Phase::kFrozen);
  EXPECT_EQ(caller.applied().size(), static_cast<std::size_t>(s.max_samples));
  EXPECT_FALSE(caller.Samples(Phase::kFrozen).empty());
  ExpectContiguousIndices(caller);
}

TEST(AutotunePolicyTest, ReportsTheCostOfTuningAndWhenItIsWonBack) {
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), Start(), Settings());
  Caller caller(policy, PoorStart());
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  // The cost, recomputed from the samples as they were reported.
  const double initial = policy.status().initial_score;
  ASSERT_GT(initial, 0);
  double seconds = 0, lost = 0, sum = 0;
  const std::vector<PolicyEvent> explored = caller.Samples(Phase::kExploring);
  ASSERT_FALSE(explored.empty());
  for (const PolicyEvent& e : explored) {
    seconds += e.seconds;
    lost += e.seconds * (1 - e.score / initial);
    sum += e.score;
  }
  PolicyStatus st = policy.status();
  EXPECT_NEAR(st.exploration_seconds, seconds, 1e-9);
  EXPECT_NEAR(st.exploration_loss_seconds, lost, 1e-9 * seconds);
  EXPECT_NEAR(st.exploration_mean_score,
              sum / static_cast<double>(explored.size()), 1e-9 * sum);
  EXPECT_EQ(st.frozen_seconds, 0);
  // From the poor start, exploring already beat the initial configuration
  // on the whole: nothing to win back.
  EXPECT_LT(st.exploration_loss_seconds, 0);
  // Frozen samples win time back from the first.
  ASSERT_TRUE(caller.RunUntil(
      [&] { return caller.Samples(Phase::kFrozen).size() >= 3; }));
  st = policy.status();
  double frozen = 0, gain = 0;
  for (const PolicyEvent& e : caller.Samples(Phase::kFrozen)) {
    frozen += e.seconds;
    gain += e.seconds * (e.score / initial - 1);
  }
  EXPECT_NEAR(st.frozen_seconds, frozen, 1e-9);
  EXPECT_NEAR(st.frozen_gain_seconds, gain, 1e-9 * frozen);
  EXPECT_GT(st.frozen_gain_seconds, 0);
  EXPECT_EQ(st.payback_seconds, 0);
}

TEST(AutotunePolicyTest, PaybackIsTheFrozenTimeThatCoversWhatExploringLost) {
  // The initial configuration is the best one here (the surface's optimum),
  // so exploring can only lose; the frozen configuration must then win
  // the loss back before the payback is reported.
  const Config best = {64 << 20, 2.0, 1 << 20, 0};
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), Start(best),
                        Settings());
  Caller caller(policy, best);
  ASSERT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  const PolicyStatus st = policy.status();
  EXPECT_GT(st.exploration_loss_seconds, 0);
  EXPECT_LT(st.exploration_mean_score, st.best_score);
  // The payback, recomputed: the frozen seconds by the first sample at
  // which the time won back covered the loss (-1: never).
  ASSERT_TRUE(caller.RunUntil(
      [&] { return caller.Samples(Phase::kFrozen).size() >= 20; }));
  const PolicyStatus later = policy.status();
  const double initial = later.initial_score;
  double frozen = 0, gain = 0, payback = -1;
  for (const PolicyEvent& e : caller.Samples(Phase::kFrozen)) {
    frozen += e.seconds;
    gain += e.seconds * (e.score / initial - 1);
    if (payback < 0 && gain >= later.exploration_loss_seconds) {
      payback = frozen;
    }
  }
  EXPECT_NEAR(later.payback_seconds, payback, 1e-9);
}

TEST(AutotunePolicyTest, IgnoresInvalidStepsAndStepsBeforeTheConfigIsTaken) {
  AutotunePolicySettings s = Settings();
  s.warmup_samples = 1;
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), Start(), s);
  policy.OnStep(0, 1, 1);
  policy.OnStep(1e9, 0, 2);
  policy.OnStep(-1, 1, 3);
  policy.OnStep(1e300, 1e-300, 4);  // infinite throughput
  policy.OnStep(NAN, 1, 5);
  EXPECT_EQ(policy.status().total_samples, 0);
  for (int i = 0; i < 3; ++i) policy.OnStep(1e9, 1, 6 + i);
  EXPECT_EQ(policy.status().total_samples, 1);
  EXPECT_EQ(policy.status().phase, Phase::kExploring);
  // A configuration waits: steps still run under the old one.
  for (int i = 0; i < 10; ++i) policy.OnStep(1e9, 1, 10 + i);
  EXPECT_EQ(policy.status().total_samples, 1);
  ASSERT_TRUE(policy.TakeConfig().has_value());
  EXPECT_FALSE(policy.TakeConfig().has_value());  // once
  policy.OnStep(1e9, 1, 20);                      // straddles the switch
  policy.OnStep(1e9, 1, 21);
  policy.OnStep(1e9, 1, 22);
  EXPECT_EQ(policy.status().total_samples, 1);
  policy.OnStep(1e9, 1, 23);
  EXPECT_EQ(policy.status().total_samples, 2);
  const std::vector<PolicyEvent> events = policy.TakeEvents();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, Kind::kSample);
  EXPECT_EQ(events.back().index, 2);
  EXPECT_EQ(events.back().time, 23);
  EXPECT_EQ(events.back().score, 1e9);
  EXPECT_TRUE(policy.TakeEvents().empty());
}

TEST(AutotunePolicyTest, EmptySpaceIsFrozenAtOnce) {
  for (const SearchSpace& space :
       {SearchSpace(std::vector<Dimension>{}),
        SearchSpace({Dimension::Continuous("cycle", 0.1, 50).Pinned(5),
                     Dimension::Categorical("algorithm", 3).Pinned(2)})}) {
    const Config initial = space.Center();
    AutotunePolicy policy(space, Start(initial), Settings());
    EXPECT_EQ(policy.status().phase, Phase::kFrozen);
    EXPECT_FALSE(policy.TakeConfig().has_value());
    const std::vector<PolicyEvent> events = policy.TakeEvents();
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].phase, Phase::kFrozen);
    EXPECT_EQ(events[0].config, initial);
    double now = 0;
    for (int i = 0; i < 60; ++i) {
      policy.OnStep(i < 10 ? 1e9 : 1e8, 1, now += 1);  // a 10x drop
    }
    EXPECT_FALSE(policy.TakeConfig().has_value());
    EXPECT_EQ(policy.status().phase, Phase::kFrozen);
    EXPECT_EQ(policy.status().total_samples, 20);
  }
}

TEST(AutotunePolicyTest, OptimizerErrorTurnsThePolicyOff) {
  for (bool asynchronous : {false, true}) {
    AutotunePolicySettings s = Settings(asynchronous);
    s.optimizer.stop_patience = 0;  // the optimizer rejects this
    AutotunePolicy policy(tt::CollectiveThroughput::Space(), Start(), s);
    Caller caller(policy, PoorStart());
    ASSERT_TRUE(caller.RunUntilPhase(Phase::kOff, 100));
    const std::vector<PolicyEvent> errors = caller.Events(Kind::kError);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].phase, Phase::kOff);
    EXPECT_EQ(errors[0].previous_phase, Phase::kExploring);
    EXPECT_NE(errors[0].message.find("invalid settings"), std::string::npos)
        << errors[0].message;
    EXPECT_EQ(policy.status().error, errors[0].message);
    EXPECT_EQ(caller.Changes().back(),
              std::make_pair(Phase::kExploring, Phase::kOff));
    // Steps go on; nothing more happens.
    caller.RunUntil([] { return false; }, 50);
    EXPECT_TRUE(caller.applied().empty());
    EXPECT_EQ(policy.status().total_samples, 3);
    EXPECT_EQ(caller.Events(Kind::kError).size(), 1u);
  }
}

TEST(AutotunePolicyTest, RejectsBadSettingsAndStarts) {
  const SearchSpace space = tt::CollectiveThroughput::Space();
  auto bad = [&](auto edit) {
    AutotunePolicySettings s = Settings();
    PolicyStart start = Start();
    edit(s, start);
    EXPECT_THROW(AutotunePolicy(space, start, s), std::invalid_argument);
  };
  bad([](auto& s, auto&) { s.steps_per_sample = 0; });
  bad([](auto& s, auto&) { s.max_samples = 0; });
  bad([](auto& s, auto&) { s.warmup_samples = -1; });
  bad([](auto& s, auto&) { s.gaussian_process_noise = 0; });
  bad([](auto& s, auto&) { s.retune_drop = 1; });
  bad([](auto& s, auto&) { s.retune_windows = 0; });
  bad([](auto& s, auto&) { s.freeze_confidence = -1; });
  bad([](auto& s, auto&) { s.exploit_share = 1.5; });
  bad([](auto&, auto& st) { st.initial = {1 << 20, 0.2}; });
  bad([](auto&, auto& st) { st.initial[1] = 1000; });  // above 50 ms
  bad([](auto&, auto& st) { st.initial[3] = 1.5; });   // not a category
  bad([](auto&, auto& st) { st.known_best = Config{1, 2, 3, 4}; });
  bad([](auto&, auto& st) { st.freeze_on_known_best = true; });
  bad([](auto&, auto& st) { st.priors.push_back({{1, 2}, 1.0}); });
  bad([](auto&, auto& st) { st.priors.push_back({PoorStart(), NAN}); });
  try {
    PolicyStart start = Start();
    start.initial[1] = 1000;
    AutotunePolicy(space, start, Settings());
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cycle_time_ms"), std::string::npos)
        << e.what();
  }
  // Priors from runs with other bounds are clamped, not rejected.
  PolicyStart start = Start();
  start.priors.push_back({{1e12, 1000, 1, 2}, 1.0});
  EXPECT_NO_THROW(AutotunePolicy(space, start, Settings()));
}

// Configurations applied and events of a run through warm-up, exploring,
// freezing, a re-tune and freezing again.
std::pair<std::vector<Config>, std::vector<PolicyEvent>> FullRun(
    bool asynchronous) {
  AutotunePolicySettings s = Settings(asynchronous);
  s.max_samples = 8;
  PolicyStart start = Start();
  start.priors = GridPriors(1e9);
  start.priors.resize(3);
  AutotunePolicy policy(tt::CollectiveThroughput::Space(), start, s);
  Caller caller(policy, PoorStart());
  EXPECT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  caller.RunUntil([] { return false; }, 12);
  caller.set_slowdown(0.5);
  EXPECT_TRUE(caller.RunUntilPhase(Phase::kRetuning));
  EXPECT_TRUE(caller.RunUntilPhase(Phase::kFrozen));
  caller.RunUntil([] { return false; }, 12);
  return {caller.applied(), caller.events()};
}

TEST(AutotunePolicyTest, DeterministicAndAsynchronousMatchesSynchronous) {
  const auto sync = FullRun(false);
  const auto again = FullRun(false);
  const auto async = FullRun(true);
  EXPECT_GE(sync.first.size(), 10u);
  EXPECT_EQ(again.first, sync.first);
  EXPECT_EQ(async.first, sync.first);
  ASSERT_EQ(async.second.size(), sync.second.size());
  for (std::size_t i = 0; i < sync.second.size(); ++i) {
    const PolicyEvent& a = async.second[i];
    const PolicyEvent& b = sync.second[i];
    EXPECT_EQ(a.kind, b.kind) << i;
    EXPECT_EQ(a.index, b.index) << i;
    EXPECT_EQ(a.phase, b.phase) << i;
    EXPECT_EQ(a.previous_phase, b.previous_phase) << i;
    EXPECT_EQ(a.config, b.config) << i;
    EXPECT_EQ(a.score, b.score) << i;
    EXPECT_EQ(a.time, b.time) << i;
  }
}

double Micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// What the caller's thread pays around the sample that ends the warm-up,
// whose optimizer work is the first model fit on ~100 observations (priors
// plus the initial configuration).
struct CallerCost {
  double sync_us = 0;      // synchronous OnStep (Observe + Suggest inside)
  double dispatch_us = 0;  // asynchronous OnStep handing the sample over
  bool computing_after_dispatch = false;
  double worker_us = 0;           // until the suggestion was ready
  std::vector<double> calls_us;   // OnStep + TakeConfig while computing
  bool suggestion_taken = false;  // the worker's result reached the caller
  int total_samples = 0;
};

CallerCost MeasureCallerCost(AutotunePolicySettings s) {
  const SearchSpace space = tt::CollectiveThroughput::Space();
  PolicyStart start = Start();
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 100; ++i) {
    Eigen::VectorXd x(4);
    x << u(rng), u(rng), u(rng), std::floor(3 * u(rng));
    const Config c = space.FromUnit(x);
    start.priors.push_back({c, 1e9 * Throughput(c)});
  }
  s.warmup_samples = 1;
  s.steps_per_sample = 1;
  using Clock = std::chrono::steady_clock;
  CallerCost cost;

  s.asynchronous = false;
  AutotunePolicy sync(space, start, s);
  auto t0 = Clock::now();
  sync.OnStep(1e9, 1, 1);
  cost.sync_us = Micros(Clock::now() - t0);

  s.asynchronous = true;
  AutotunePolicy async(space, start, s);
  const auto dispatched = Clock::now();
  async.OnStep(1e9, 1, 1);
  cost.dispatch_us = Micros(Clock::now() - dispatched);
  cost.computing_after_dispatch = async.computing();
  std::optional<Config> next;
  double now = 1;
  while (!next && async.computing()) {
    t0 = Clock::now();
    async.OnStep(1e9, 1, now += 1);
    next = async.TakeConfig();
    cost.calls_us.push_back(Micros(Clock::now() - t0));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  async.WaitIdle();
  cost.worker_us = Micros(Clock::now() - dispatched);
  if (!next) next = async.TakeConfig();
  cost.suggestion_taken = next.has_value();
  cost.total_samples = async.status().total_samples;
  std::sort(cost.calls_us.begin(), cost.calls_us.end());
  std::printf(
      "synchronous OnStep (Observe + Suggest, first fit at 101 "
      "observations): %.0f us\n"
      "asynchronous OnStep handing the sample over: %.1f us; worker busy "
      "%.0f us; %zu OnStep + TakeConfig calls meanwhile: median %.2f us, max "
      "%.2f us\n",
      cost.sync_us, cost.dispatch_us, cost.worker_us, cost.calls_us.size(),
      cost.calls_us.empty() ? 0.0 : cost.calls_us[cost.calls_us.size() / 2],
      cost.calls_us.empty() ? 0.0 : cost.calls_us.back());
  return cost;
}

TEST(AutotunePolicyTest, CallerThreadStaysCheapWhileTheWorkerComputes) {
  // Default optimizer settings: the figures to compare (not asserted: they
  // depend on the machine and its load).
  MeasureCallerCost(Settings());
  // Deliberately slow: 20 restarts of the hyperparameter fit, so that the
  // worker is still busy long after OnStep returned, however loaded the
  // machine is.
  AutotunePolicySettings slow = Settings();
  slow.optimizer.gp.restarts = 20;
  const CallerCost cost = MeasureCallerCost(slow);
  EXPECT_TRUE(cost.computing_after_dispatch);
  EXPECT_FALSE(cost.calls_us.empty());
  EXPECT_TRUE(cost.suggestion_taken);
  // Steps reported while the worker computed were not scored.
  EXPECT_EQ(cost.total_samples, 1);
}

TEST(AutotunePolicyTest, DestructionWhileTheWorkerComputesReturns) {
  PolicyStart start = Start();
  start.priors = GridPriors(1e9);
  AutotunePolicySettings s = Settings(/*asynchronous=*/true);
  s.warmup_samples = 1;
  s.steps_per_sample = 1;
  auto policy = std::make_unique<AutotunePolicy>(
      tt::CollectiveThroughput::Space(), start, s);
  // The warm-up sample hands the worker a fit over every prior.
  policy->OnStep(1e9, 1, 1);
  const bool was_computing = policy->computing();
  // How long one such computation takes, timed on a synchronous twin.
  AutotunePolicySettings sync = s;
  sync.asynchronous = false;
  AutotunePolicy twin(tt::CollectiveThroughput::Space(), start, sync);
  const auto t0 = std::chrono::steady_clock::now();
  twin.OnStep(1e9, 1, 1);
  const auto t1 = std::chrono::steady_clock::now();
  policy.reset();  // joins the worker, whatever it is doing
  const auto t2 = std::chrono::steady_clock::now();
  const std::chrono::duration<double> one = t1 - t0, destroy = t2 - t1;
  // The fit outlasted the call that started it, so the destructor met a
  // busy worker (a fit that finished at once would test nothing) ...
  EXPECT_TRUE(was_computing);
  // ... and waited for no more than that one computation (twice its time,
  // plus scheduling slack on a loaded machine), never for a hang.
  EXPECT_LT(destroy.count(), 2 * one.count() + 1.0)
      << "one computation " << one.count() << " s";
}

}  // namespace
}  // namespace hvdtune::tuner
