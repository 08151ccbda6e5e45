// Simple-regret benchmark of the tuner against baselines.
//
// For each objective (Branin 2-D, Hartmann-6, and the noisy collective
// throughput surface described in test_functions.h) and each optimizer, runs
// `--seeds` independent seeds and reports the median and 90th percentile of
// the simple regret r = |f(x_hat) - f*| / |f*| after 10, 20 and 40 samples,
// where x_hat is the optimizer's incumbent and f the noiseless objective.
//
// Optimizers:
//   hvdtune_bo     BayesianOptimizer with its defaults (4-point initial
//                  design), incumbent = Best() (posterior mean).
//   random         uniform random sampling, incumbent = best observed score.
//   lhs            a maximin Latin hypercube of exactly N points for each N,
//                  incumbent = best observed score.
//   horovod_style  Horovod's structure: GP + EI (xi = 0.1) over the
//                  continuous knobs only, on linear axes, one isotropic
//                  length scale fitted by maximum likelihood without priors,
//                  4 random initial points; each value of the categorical
//                  knobs is tried in turn with a fresh GP and an equal share
//                  of the budget; incumbent = best observed score.
//
// Usage: tuner_bench [--seeds N] [--quick] [--json] [--function NAME]
//                    [--optimizer NAME]

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hvdtune/tuner/bayes_optimizer.h"
#include "hvdtune/tuner/initial_design.h"
#include "test_functions.h"

namespace {

using hvdtune::tuner::BayesianOptimizer;
using hvdtune::tuner::BayesOptSettings;
using hvdtune::tuner::Config;
using hvdtune::tuner::Dimension;
using hvdtune::tuner::DimensionKind;
using hvdtune::tuner::SearchSpace;
namespace tt = hvdtune::tuner::testing;

constexpr int kCheckpoints[] = {10, 20, 40};
constexpr int kBudget = 40;

struct Objective {
  std::string name;
  SearchSpace space;
  std::function<double(const Config&)> value;  // noiseless, minimised
  double optimum;
  double noise;  // multiplicative noise half-width on the observed score
};

// Observed score: -f, times a uniform factor in [1 - noise, 1 + noise].
double Observe(const Objective& obj, const Config& c, std::mt19937_64& rng) {
  const double f = -obj.value(c);
  if (obj.noise == 0) return f;
  std::uniform_real_distribution<double> u(1 - obj.noise, 1 + obj.noise);
  return f * u(rng);
}

double Regret(const Objective& obj, const Config& c) {
  return std::abs(obj.value(c) - obj.optimum) / std::abs(obj.optimum);
}

using Trace = std::vector<double>;  // regret at each checkpoint

Trace RunBo(const Objective& obj, std::uint64_t seed) {
  BayesOptSettings settings;
  settings.seed = seed;
  settings.initial_design_size = 4;
  BayesianOptimizer opt(obj.space, settings);
  std::mt19937_64 noise(seed ^ 0x9e3779b97f4a7c15ULL);
  Trace trace;
  for (int n = 1; n <= kBudget; ++n) {
    const Config c = opt.Suggest();
    opt.Observe(c, Observe(obj, c, noise));
    if (std::find(std::begin(kCheckpoints), std::end(kCheckpoints), n) !=
        std::end(kCheckpoints)) {
      trace.push_back(Regret(obj, opt.Best()->config));
    }
  }
  return trace;
}

// Incumbent = best observed score, as random search and Horovod report.
struct BestObserved {
  double score = -INFINITY;
  Config config;
  void Add(const Config& c, double s) {
    if (s > score) score = s, config = c;
  }
};

Trace RunRandom(const Objective& obj, std::uint64_t seed) {
  std::mt19937_64 rng(seed), noise(seed ^ 0x9e3779b97f4a7c15ULL);
  const auto points = hvdtune::tuner::UniformRandom(
      kBudget, obj.space.num_continuous(), obj.space.CategoryCounts(), rng);
  BestObserved best;
  Trace trace;
  for (int n = 1; n <= kBudget; ++n) {
    const Config c = obj.space.FromUnit(points[n - 1]);
    best.Add(c, Observe(obj, c, noise));
    if (n == 10 || n == 20 || n == 40)
      trace.push_back(Regret(obj, best.config));
  }
  return trace;
}

Trace RunLhs(const Objective& obj, std::uint64_t seed) {
  Trace trace;
  for (int n : kCheckpoints) {
    std::mt19937_64 rng(seed * 131 + n), noise(seed ^ 0x9e3779b97f4a7c15ULL);
    BestObserved best;
    for (const auto& u : hvdtune::tuner::LatinHypercube(
             n, obj.space.num_continuous(), obj.space.CategoryCounts(), rng)) {
      const Config c = obj.space.FromUnit(u);
      best.Add(c, Observe(obj, c, noise));
    }
    trace.push_back(Regret(obj, best.config));
  }
  return trace;
}

Trace RunHorovodStyle(const Objective& obj, std::uint64_t seed) {
  // Every combination of the categorical knobs, in order.
  const std::vector<int> counts = obj.space.CategoryCounts();
  int combos = 1;
  for (int k : counts) combos *= k;
  std::mt19937_64 noise(seed ^ 0x9e3779b97f4a7c15ULL);
  BestObserved best;
  Trace trace;
  int n = 0;
  for (int combo = 0; combo < combos; ++combo) {
    std::vector<Dimension> dims = obj.space.dimensions();
    int rest = combo;
    for (std::size_t c = 0; c < counts.size(); ++c) {
      Dimension& d = dims[obj.space.categorical_indices()[c]];
      d = d.Pinned(rest % counts[c]);
      rest /= counts[c];
    }
    for (Dimension& d : dims) d.log_scale = false;  // Horovod's linear axes
    BayesOptSettings settings;
    settings.seed = seed * 7 + combo;
    settings.initial_design_size = 4;
    settings.latin_hypercube = false;
    settings.gp.ard = false;
    settings.gp.use_priors = false;
    settings.acquisition.kind =
        hvdtune::tuner::AcquisitionKind::kExpectedImprovement;
    settings.acquisition.xi = 0.1;
    settings.acquisition.xi_noise = 0;  // plain EI, as Horovod
    settings.num_anchors = 0;
    BayesianOptimizer opt{SearchSpace(dims), settings};
    const int share = kBudget * (combo + 1) / combos - kBudget * combo / combos;
    for (int i = 0; i < share; ++i) {
      const Config c = opt.Suggest();
      const double s = Observe(obj, c, noise);
      opt.Observe(c, s);
      best.Add(c, s);
      ++n;
      if (n == 10 || n == 20 || n == 40)
        trace.push_back(Regret(obj, best.config));
    }
  }
  return trace;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

}  // namespace

int main(int argc, char** argv) {
  int seeds = 30;
  bool json = false;
  std::string only_function, only_optimizer;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seeds" && i + 1 < argc) {
      seeds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--quick") {
      seeds = 5;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--function" && i + 1 < argc) {
      only_function = argv[++i];
    } else if (arg == "--optimizer" && i + 1 < argc) {
      only_optimizer = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seeds N] [--quick] [--json] [--function "
                   "branin|hartmann6|throughput] [--optimizer "
                   "hvdtune_bo|random|lhs|horovod_style]\n",
                   argv[0]);
      return 2;
    }
  }

  const std::vector<Objective> objectives = {
      {"branin", tt::Branin::Space(), tt::Branin::Value, tt::Branin::kOptimum,
       0},
      {"hartmann6", tt::Hartmann6::Space(), tt::Hartmann6::Value,
       tt::Hartmann6::kOptimum, 0},
      {"throughput", tt::CollectiveThroughput::Space(),
       tt::CollectiveThroughput::Value,
       tt::CollectiveThroughput::OptimumValue(), 0.05},
  };
  const std::vector<
      std::pair<std::string, Trace (*)(const Objective&, std::uint64_t)>>
      optimizers = {{"hvdtune_bo", RunBo},
                    {"random", RunRandom},
                    {"lhs", RunLhs},
                    {"horovod_style", RunHorovodStyle}};

  if (!json) {
    std::printf("%d seeds; regret |f(x_hat) - f*| / |f*| (median / p90)\n",
                seeds);
    std::printf("%-11s %-14s %21s %21s %21s\n", "function", "optimizer", "@10",
                "@20", "@40");
  }
  for (const Objective& obj : objectives) {
    if (!only_function.empty() && obj.name != only_function) continue;
    for (const auto& [name, run] : optimizers) {
      if (!only_optimizer.empty() && name != only_optimizer) continue;
      std::vector<std::vector<double>> regrets(std::size(kCheckpoints));
      for (int s = 0; s < seeds; ++s) {
        const Trace t = run(obj, 1000 + s);
        for (std::size_t k = 0; k < t.size(); ++k) regrets[k].push_back(t[k]);
      }
      if (!json) std::printf("%-11s %-14s", obj.name.c_str(), name.c_str());
      for (std::size_t k = 0; k < regrets.size(); ++k) {
        const double med = Quantile(regrets[k], 0.5),
                     p90 = Quantile(regrets[k], 0.9);
        if (json) {
          std::printf(
              "{\"function\":\"%s\",\"optimizer\":\"%s\",\"samples\":%d,"
              "\"median_regret\":%.6g,\"p90_regret\":%.6g}\n",
              obj.name.c_str(), name.c_str(), kCheckpoints[k], med, p90);
        } else {
          std::printf("  %9.3g / %9.3g", med, p90);
        }
      }
      if (!json) std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
