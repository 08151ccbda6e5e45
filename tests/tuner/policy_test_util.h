// What the AutotunePolicy tests share: the objective, starts, settings,
// and a caller that drives a policy step by step.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "hvdtune/tuner/autotune_policy.h"
#include "test_functions.h"

namespace hvdtune::tuner::testing_policy {

namespace tt = testing;
using Kind = PolicyEvent::Kind;

// The job's throughput (GB/s) under a configuration of the collective
// throughput surface: what a step measures, before noise.
inline double Throughput(const Config& c) {
  return -tt::CollectiveThroughput::Value(c);
}

// Far from the optimum: 1 MiB fusion, 0.2 ms cycles, 64 KiB segments, ring.
inline Config PoorStart() { return {1 << 20, 0.2, 64 << 10, 1}; }

inline PolicyStart Start(Config initial = PoorStart()) {
  PolicyStart start;
  start.initial = std::move(initial);
  return start;
}

inline AutotunePolicySettings Settings(bool asynchronous = false) {
  AutotunePolicySettings s;
  s.warmup_samples = 3;
  s.steps_per_sample = 3;
  // Fixed-length samples: these tests count steps (the adaptive length has
  // its own tests, autotune_policy_sample_test.cc).
  s.sample_precision = 0;
  s.max_samples = 12;
  s.retune_drop = 0.15;
  s.retune_windows = 2;
  s.seed = 5;
  s.asynchronous = asynchronous;
  return s;
}

// Plays the caller: polls TakeConfig() before every step, then reports one
// step measured under the configuration in force (+-2% noise, times
// `slowdown`). Asynchronous policies are waited for after every step, which
// makes them deterministic too.
class Caller {
 public:
  Caller(AutotunePolicy& policy, Config in_force)
      : policy_(policy), in_force_(std::move(in_force)) {}

  void Step() {
    if (auto next = policy_.TakeConfig()) {
      in_force_ = *next;
      applied_.push_back(*next);
    }
    const double seconds = 0.1;
    const double factor = noise_fn_ ? noise_fn_(rng_) : noise_(rng_);
    const double gbps = Throughput(in_force_) * factor * slowdown_;
    now_ += seconds;
    policy_.OnStep(gbps * 1e9 * seconds, seconds, now_);
    ++steps_;
    policy_.WaitIdle();
    for (PolicyEvent& e : policy_.TakeEvents()) events_.push_back(e);
  }
  // Steps until `done` holds (true) or `max_steps` were taken (false).
  template <typename F>
  bool RunUntil(F done, int max_steps = 2000) {
    for (int i = 0; i < max_steps; ++i) {
      if (done()) return true;
      Step();
    }
    return done();
  }
  bool RunUntilPhase(Phase phase, int max_steps = 2000) {
    return RunUntil([&] { return policy_.status().phase == phase; }, max_steps);
  }

  void set_slowdown(double s) { slowdown_ = s; }
  // Replaces the +-2% noise: `f` returns a step's factor.
  void set_noise(std::function<double(std::mt19937_64&)> f) {
    noise_fn_ = std::move(f);
  }
  const Config& in_force() const { return in_force_; }
  const std::vector<Config>& applied() const { return applied_; }
  const std::vector<PolicyEvent>& events() const { return events_; }
  int steps() const { return steps_; }

  std::vector<PolicyEvent> Events(Kind kind) const {
    std::vector<PolicyEvent> out;
    for (const PolicyEvent& e : events_) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  std::vector<PolicyEvent> Samples(Phase phase) const {
    std::vector<PolicyEvent> out;
    for (const PolicyEvent& e : Events(Kind::kSample)) {
      if (e.phase == phase) out.push_back(e);
    }
    return out;
  }
  // Phase changes as (from, to) pairs.
  std::vector<std::pair<Phase, Phase>> Changes() const {
    std::vector<std::pair<Phase, Phase>> out;
    for (const PolicyEvent& e : Events(Kind::kPhaseChange)) {
      out.emplace_back(e.previous_phase, e.phase);
    }
    return out;
  }

 private:
  AutotunePolicy& policy_;
  Config in_force_;
  std::mt19937_64 rng_{11};
  std::uniform_real_distribution<double> noise_{0.98, 1.02};
  std::function<double(std::mt19937_64&)> noise_fn_;
  double slowdown_ = 1;
  double now_ = 0;
  int steps_ = 0;
  std::vector<Config> applied_;
  std::vector<PolicyEvent> events_;
};

inline void ExpectContiguousIndices(const Caller& caller) {
  int expected = 1;
  for (const PolicyEvent& e : caller.Events(Kind::kSample)) {
    EXPECT_EQ(e.index, expected++);
  }
}

using Changes = std::vector<std::pair<Phase, Phase>>;

// A coarse grid over the space, best first: scored configurations from
// "other runs".
inline std::vector<PriorSample> GridPriors(double scale) {
  const SearchSpace space = tt::CollectiveThroughput::Space();
  std::vector<PriorSample> all;
  for (int a = 0; a < 3; ++a) {
    for (double i : {0.1, 0.5, 0.9}) {
      for (double j : {0.1, 0.5, 0.9}) {
        for (double k : {0.1, 0.5, 0.9}) {
          Eigen::VectorXd u(4);
          u << i, j, k, a;
          const Config c = space.FromUnit(u);
          all.push_back({c, scale * Throughput(c)});
        }
      }
    }
  }
  std::sort(all.begin(), all.end(),
            [](const auto& x, const auto& y) { return x.score > y.score; });
  return all;
}

}  // namespace hvdtune::tuner::testing_policy
