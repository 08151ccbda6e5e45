// Suggestion latency of the tuner at 20, 40, 100 and 200 observations.
//
// The objective is the 4-D collective-throughput surface (3 log-scaled
// continuous knobs + a 3-way categorical), the space the runtime tunes.
// Two views, each reported as per-call median and p99 (milliseconds):
//  - BM_Suggest: Suggest() on an optimizer already holding N observations
//    with its model fitted; what a round costs between hyperparameter
//    refits (new points enter by Cholesky update).
//  - BM_ObserveSuggest: the steady state around N: Observe(one more point)
//    followed by Suggest(), cycling through N-10 .. N+9 observations, so the
//    periodic hyperparameter refits are included at their real frequency.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "hvdtune/tuner/bayes_optimizer.h"
#include "test_functions.h"

namespace {

using hvdtune::tuner::BayesianOptimizer;
using hvdtune::tuner::BayesOptSettings;
using hvdtune::tuner::Config;
namespace tt = hvdtune::tuner::testing;

// Observations from a deterministic random stream of configurations.
std::vector<std::pair<Config, double>> Samples(int n) {
  const auto space = tt::CollectiveThroughput::Space();
  BayesOptSettings settings;
  settings.seed = 99;
  settings.initial_design_size = n;  // all space-filling: fast to build
  BayesianOptimizer design(space, settings);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  std::vector<std::pair<Config, double>> out;
  for (int i = 0; i < n; ++i) {
    const Config c = design.Suggest();
    out.push_back({c, -tt::CollectiveThroughput::Value(c) * noise(rng)});
  }
  return out;
}

BayesianOptimizer Prepared(
    const std::vector<std::pair<Config, double>>& samples, int n) {
  BayesOptSettings settings;
  settings.seed = 1;
  settings.initial_design_size = 1;
  BayesianOptimizer opt(tt::CollectiveThroughput::Space(), settings);
  for (int i = 0; i < n; ++i) opt.Observe(samples[i].first, samples[i].second);
  opt.Suggest();  // consumes the design point
  opt.Suggest();  // fits the model at n observations
  return opt;
}

void Report(benchmark::State& state, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  state.counters["median_ms"] = ms[ms.size() / 2];
  state.counters["p99_ms"] = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  state.counters["max_ms"] = ms.back();
}

double Millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

void BM_Suggest(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const BayesianOptimizer base = Prepared(Samples(n), n);
  std::vector<double> ms;
  for (auto _ : state) {
    state.PauseTiming();
    BayesianOptimizer opt = base;
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(opt.Suggest());
    ms.push_back(Millis(std::chrono::steady_clock::now() - start));
  }
  Report(state, ms);
}

void BM_ObserveSuggest(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto samples = Samples(n + 10);
  const BayesianOptimizer base = Prepared(samples, n - 10);
  BayesianOptimizer opt = base;
  int next = n - 10;
  std::vector<double> ms;
  for (auto _ : state) {
    if (next == n + 10) {
      state.PauseTiming();
      opt = base;
      next = n - 10;
      state.ResumeTiming();
    }
    const auto start = std::chrono::steady_clock::now();
    opt.Observe(samples[next].first, samples[next].second);
    benchmark::DoNotOptimize(opt.Suggest());
    ms.push_back(Millis(std::chrono::steady_clock::now() - start));
    ++next;
  }
  Report(state, ms);
}

BENCHMARK(BM_Suggest)
    ->Arg(20)
    ->Arg(40)
    ->Arg(100)
    ->Arg(200)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(200);
BENCHMARK(BM_ObserveSuggest)
    ->Arg(20)
    ->Arg(40)
    ->Arg(100)
    ->Arg(200)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(200);

}  // namespace

BENCHMARK_MAIN();
