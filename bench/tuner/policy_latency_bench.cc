// What the caller's thread pays for the autotune policy, synchronous versus
// asynchronous, with N prior observations (20, 50, 100, 200) on the 4-D
// collective-throughput space.
//
// Each run ends the warm-up, then takes `--rounds` exploration samples of
// one step each. Per round, the optimizer observes one sample and suggests
// the next configuration: the first round fits the model's hyperparameters
// on N + 1 observations, later ones mostly add a point by Cholesky update
// (a refit comes whenever the data grew by 10%).
//  - synchronous: that work runs inside the OnStep() that ends the sample;
//    reported per round (first round, then the median of the others), ms.
//  - asynchronous: OnStep() hands the sample to the worker; the caller
//    then polls OnStep() + TakeConfig() every 50 us, as a cycle loop would,
//    until the suggestion is ready. Reported: the caller's calls (median,
//    p99, max over all rounds, us) and how long the worker was busy (first
//    round, median of the others, ms).
//
// Usage: policy_latency_bench [--rounds N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hvdtune/tuner/autotune_policy.h"
#include "test_functions.h"

namespace {

using hvdtune::tuner::AutotunePolicy;
using hvdtune::tuner::AutotunePolicySettings;
using hvdtune::tuner::Config;
using hvdtune::tuner::PolicyStart;
using hvdtune::tuner::SearchSpace;
namespace tt = hvdtune::tuner::testing;
using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * v.size()))];
}

double Throughput(const Config& c) {
  return -tt::CollectiveThroughput::Value(c) * 1e9;
}

PolicyStart StartWithPriors(int n) {
  const SearchSpace space = tt::CollectiveThroughput::Space();
  PolicyStart start;
  start.initial = space.Center();
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd x(4);
    x << u(rng), u(rng), u(rng), std::floor(3 * u(rng));
    const Config c = space.FromUnit(x);
    start.priors.push_back({c, Throughput(c)});
  }
  return start;
}

AutotunePolicySettings Settings(bool asynchronous, int rounds) {
  AutotunePolicySettings s;
  s.warmup_samples = 1;
  s.steps_per_sample = 1;
  s.sample_precision = 0;      // one step, one optimizer round
  s.max_samples = rounds + 2;  // no freeze within the measured rounds
  s.asynchronous = asynchronous;
  return s;
}

// Per-round synchronous OnStep times (us).
std::vector<double> RunSynchronous(int priors, int rounds) {
  AutotunePolicy policy(tt::CollectiveThroughput::Space(),
                        StartWithPriors(priors), Settings(false, rounds));
  Config in_force = policy.space().Center();
  std::vector<double> out;
  double now = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    policy.OnStep(Throughput(in_force), 1, now += 1);
    out.push_back(Micros(Clock::now() - t0));
    in_force = *policy.TakeConfig();
    policy.OnStep(Throughput(in_force), 1, now += 1);  // straddles the switch
  }
  return out;
}

struct AsyncResult {
  std::vector<double> worker_us;  // per round
  std::vector<double> calls_us;   // every caller call while computing
};

AsyncResult RunAsynchronous(int priors, int rounds) {
  AutotunePolicy policy(tt::CollectiveThroughput::Space(),
                        StartWithPriors(priors), Settings(true, rounds));
  Config in_force = policy.space().Center();
  AsyncResult out;
  double now = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto dispatched = Clock::now();
    policy.OnStep(Throughput(in_force), 1, now += 1);
    out.calls_us.push_back(Micros(Clock::now() - dispatched));
    std::optional<Config> next;
    while (!next) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      const auto t0 = Clock::now();
      policy.OnStep(Throughput(in_force), 1, now += 1);
      next = policy.TakeConfig();
      out.calls_us.push_back(Micros(Clock::now() - t0));
    }
    out.worker_us.push_back(Micros(Clock::now() - dispatched));
    in_force = *next;
    policy.OnStep(Throughput(in_force), 1, now += 1);  // straddles the switch
  }
  return out;
}

double MedianOfLater(const std::vector<double>& v) {
  return Quantile(std::vector<double>(v.begin() + 1, v.end()), 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(2, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--rounds N]\n", argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  std::printf("%-7s | %-27s | %-27s | %s\n", "", "synchronous OnStep (ms)",
              "asynchronous worker (ms)", "asynchronous caller call (us)");
  std::printf("%-7s | %12s %14s | %12s %14s | %8s %8s %8s\n", "priors",
              "first (fit)", "later median", "first (fit)", "later median",
              "median", "p99", "max");
  for (int priors : {20, 50, 100, 200}) {
    const std::vector<double> sync = RunSynchronous(priors, rounds);
    const AsyncResult async = RunAsynchronous(priors, rounds);
    std::printf("%-7d | %12.2f %14.2f | %12.2f %14.2f | %8.2f %8.2f %8.2f\n",
                priors, sync[0] / 1e3, MedianOfLater(sync) / 1e3,
                async.worker_us[0] / 1e3, MedianOfLater(async.worker_us) / 1e3,
                Quantile(async.calls_us, 0.5), Quantile(async.calls_us, 0.99),
                Quantile(async.calls_us, 1.0));
  }
  return 0;
}
