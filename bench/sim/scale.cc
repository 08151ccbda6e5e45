#include "scale.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>

#include "hvdtune/knob_space.h"
#include "hvdtune/tuner/autotune_policy.h"
#include "hvdtune/tuner/bayes_optimizer.h"
#include "hvdtune/tuner/initial_design.h"

namespace hvdtune::sim {

using tuner::Config;

std::vector<Scenario> DefaultScenarios() {
  return {
      {"resnet50-nvlink-8", "nvlink-ib", {1, 8}, "resnet50", 0.05},
      {"resnet50-nvlink-512", "nvlink-ib", {64, 8}, "resnet50", 0.05},
      {"resnet50-pcie-64", "pcie-25gbe", {16, 4}, "resnet50", 0.05},
      {"resnet50-cpu-128", "cpu-10gbe", {32, 4}, "resnet50", 0.10},
      {"vgg16-pcie-32", "pcie-25gbe", {8, 4}, "vgg16", 0.05},
      {"vgg16-nvlink-4096", "nvlink-ib", {512, 8}, "vgg16", 0.03},
      {"bert-nvlink-1024", "nvlink-ib", {128, 8}, "bert-base", 0.05},
      {"bert-pcie-8", "pcie-25gbe", {2, 4}, "bert-base", 0.05},
      {"bert-cpu-64", "cpu-10gbe", {16, 4}, "bert-base", 0.10},
      {"small-nvlink-256", "nvlink-ib", {32, 8}, "many-small", 0.05},
      {"small-cpu-8", "cpu-10gbe", {2, 4}, "many-small", 0.10},
      {"small-pcie-4096", "pcie-25gbe", {1024, 4}, "many-small", 0.05},
      {"narrow-pcie-16", "pcie-25gbe", {4, 4}, "narrow", 0.05},
      {"far-nvlink-2048", "nvlink-ib", {256, 8}, "far-optimum", 0.05},
      // The emulated cluster of this machine (tools/cluster.sh), its presets
      // fitted to steps measured there: its own size, and larger.
      {"resnet50-emu1gbe-4", "emulated-1gbe", {2, 2}, "resnet50", 0.10},
      {"bert-emu1gbe-32", "emulated-1gbe", {16, 2}, "bert-base", 0.10},
      {"small-emu10gbe-8", "emulated-10gbe", {4, 2}, "many-small", 0.10},
  };
}

struct Problem::Impl {
  KnobConfig knobs;  // the runtime's start, nothing pinned
  std::unique_ptr<KnobSpace> space;
};

Problem::Problem(const Scenario& s, const std::string& shapes_dir)
    : scenario_(s),
      preset_(FindPreset(s.preset)),
      workload_(MakeWorkload(s.workload, shapes_dir)) {
  auto impl = std::make_shared<Impl>();
  // The runtime's own start (the MPI engine's rule for this layout).
  const std::string_view start = DefaultAllreduceAlgorithm(
      s.cluster.ranks_per_node > 1, s.cluster.nodes > 1, EngineKind::kMpi,
      preset_.gpu);
  impl->knobs.values.Set(
      KnobId::kAllreduceAlgorithm,
      ParseKnobValue(GetKnobSpec(KnobId::kAllreduceAlgorithm), start));
  impl->space = std::make_unique<KnobSpace>(impl->knobs, s.cluster.nodes > 1,
                                            workload_.app_groups);
  impl_ = std::move(impl);
}

void Problem::set_model_options(std::vector<std::string> options) {
  ApplyModelOptions(options, nullptr);  // checks the names
  model_options_ = std::move(options);
}

void Problem::set_steps_per_sample(int steps) {
  if (steps < 1) {
    throw std::invalid_argument("steps per sample must be >= 1");
  }
  steps_per_sample_ = steps;
}

void Problem::set_sample_precision(double precision) {
  if (!(precision >= 0 && precision <= 1)) {
    throw std::invalid_argument("sample precision must be in [0, 1]");
  }
  sample_precision_ = precision;
}

const std::vector<std::string>& ModelOptionNames() {
  static const std::vector<std::string> kNames = {"effects", "scales", "log"};
  return kNames;
}

void ApplyModelOptions(const std::vector<std::string>& options,
                       tuner::GpSettings* gp) {
  tuner::GpSettings ignored;
  if (!gp) gp = &ignored;
  for (const std::string& o : options) {
    if (o == "effects") {
      gp->category_effects = true;
    } else if (o == "scales") {
      gp->category_scales = true;
    } else if (o == "log") {
      gp->log_outputs = true;
    } else {
      throw std::invalid_argument("unknown model option '" + o +
                                  "' (effects, scales, log)");
    }
  }
}

const tuner::SearchSpace& Problem::space() const {
  return impl_->space->space();
}

Config Problem::default_config() const {
  return impl_->space->ToConfig(impl_->knobs.values);
}

KnobSettings Problem::Knobs(const Config& c) const {
  return impl_->space->FromConfig(c, impl_->knobs.values);
}

double Problem::Score(const Config& c) const {
  return SimulateStep(preset_, scenario_.cluster, workload_, Knobs(c))
      .bytes_per_s;
}

Config Problem::SearchOptimum() const {
  // Unit vectors hold the continuous (and integer) axes first, then the
  // categorical indices (SearchSpace::FromUnit).
  const tuner::SearchSpace& sp = space();
  const int nc = sp.num_continuous();
  const std::vector<int> counts = sp.CategoryCounts();
  int combos = 1;
  for (int k : counts) combos *= k;
  std::vector<std::pair<double, Eigen::VectorXd>> top;
  const int grid = 7;
  Eigen::VectorXd u = Eigen::VectorXd::Zero(sp.num_free());
  std::vector<int> free_dims;
  for (int i = 0; i < nc; ++i) free_dims.push_back(i);
  for (int combo = 0; combo < combos; ++combo) {
    int rest = combo;
    for (std::size_t c = 0; c < counts.size(); ++c) {
      u[nc + static_cast<int>(c)] = rest % counts[c];
      rest /= counts[c];
    }
    int points = 1;
    for (std::size_t i = 0; i < free_dims.size(); ++i) points *= grid;
    for (int g = 0; g < points; ++g) {
      int r = g;
      for (int f : free_dims) {
        u[f] = static_cast<double>(r % grid) / (grid - 1);
        r /= grid;
      }
      top.push_back({Score(sp.FromUnit(u)), u});
    }
  }
  std::sort(top.begin(), top.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  top.resize(std::min<std::size_t>(top.size(), 5));
  double best = -1;
  Eigen::VectorXd best_u;
  for (auto [score, start] : top) {
    for (double step = 0.5 / (grid - 1); step > 1e-4; step *= 0.5) {
      for (bool improved = true; improved;) {
        improved = false;
        for (int f : free_dims) {
          for (double sign : {-1.0, 1.0}) {
            Eigen::VectorXd trial = start;
            trial[f] = std::clamp(trial[f] + sign * step, 0.0, 1.0);
            const double v = Score(sp.FromUnit(trial));
            if (v > score) score = v, start = trial, improved = true;
          }
        }
      }
    }
    if (score > best) best = score, best_u = start;
  }
  return sp.FromUnit(best_u);
}

double Problem::GoodFraction(double best, double within, int samples) const {
  std::mt19937_64 rng(12345);
  const auto pts = tuner::UniformRandom(samples, space().num_continuous(),
                                        space().CategoryCounts(), rng);
  int good = 0;
  for (const auto& u : pts)
    good += Score(space().FromUnit(u)) >= best * (1 - within);
  return static_cast<double>(good) / samples;
}

namespace {

// The measured score of one step: the noiseless step time times a factor
// drawn from N(1, noise), kept above 0.5.
struct NoisyStep {
  const Problem& p;
  std::mt19937_64 rng;
  std::normal_distribution<double> n{0.0, 1.0};
  NoisyStep(const Problem& problem, std::uint64_t seed)
      : p(problem), rng(seed ^ 0x9e3779b97f4a7c15ULL) {}
  double Seconds(const Config& c) {
    const double f = std::max(0.5, 1 + p.scenario().noise * n(rng));
    return SimulateStep(p.preset(), p.scenario().cluster, p.workload(),
                        p.Knobs(c))
               .step_s *
           f;
  }
  double Score(const Config& c) {
    return static_cast<double>(p.workload().total_bytes()) / Seconds(c);
  }
  // One sample of a baseline, measured as the runtime's policy measures
  // one: the median score of at least the problem's steps per sample, with
  // a sample precision more until it is that precise or reaches the
  // runtime's caps (one step, fixed length: that step's score).
  double SampleScore(const Config& c) {
    const int k = p.steps_per_sample();
    const double precision = p.sample_precision();
    if (k == 1 && precision == 0) return Score(c);
    const double bytes = static_cast<double>(p.workload().total_bytes());
    tuner::AutotunePolicySettings rule;  // the runtime's caps
    rule.steps_per_sample = k;
    rule.sample_precision = precision;
    std::vector<double> scores, logs;
    double seconds = 0;
    for (;;) {
      const double s = Seconds(c);
      seconds += s;
      scores.push_back(bytes / s);
      logs.push_back(std::log(bytes / s));
      if (static_cast<int>(scores.size()) >= k &&
          tuner::SampleMayClose(rule, static_cast<long long>(scores.size()),
                                seconds, tuner::MedianLogHalfWidth(logs))) {
        break;
      }
    }
    std::sort(scores.begin(), scores.end());
    const std::size_t n = scores.size();
    return n % 2 ? scores[n / 2] : 0.5 * (scores[n / 2 - 1] + scores[n / 2]);
  }
};

struct BestObserved {
  double score = -INFINITY;
  Config config;
  void Add(const Config& c, double s) {
    if (s > score) score = s, config = c;
  }
};

// The runtime's autotune lifecycle, exactly: AutotunePolicy over the
// KnobSpace of the knob table, fed one simulated step at a time (the step
// that straddles a switch is discarded by the policy, as in the runtime).
Config PolicyRun(const Problem& p, std::uint64_t seed, int budget,
                 const std::vector<tuner::PriorSample>& priors = {},
                 std::vector<tuner::PolicyEvent>* samples = nullptr,
                 tuner::PolicyStatus* frozen_status = nullptr) {
  tuner::AutotunePolicySettings settings;
  settings.warmup_samples = 1;
  // Samples as the problem measures them (the runtime's default caps).
  settings.steps_per_sample = p.steps_per_sample();
  settings.sample_precision = p.sample_precision();
  settings.max_samples = budget;
  settings.seed = seed;
  settings.asynchronous = false;
  settings.retune_drop = 0;
  ApplyModelOptions(p.model_options(), &settings.optimizer.gp);
  tuner::PolicyStart start;
  start.initial = p.default_config();
  start.priors = priors;
  tuner::AutotunePolicy policy(p.space(), start, settings);
  NoisyStep step(p, seed * 31 + budget);
  Config current = start.initial;
  const double bytes = static_cast<double>(p.workload().total_bytes());
  double now = 0;
  const int max_steps =
      p.steps_per_sample() * (p.sample_precision() > 0 ? 10 : 1);
  for (int i = 0; i < (20 * budget + 100) * max_steps; ++i) {
    if (auto c = policy.TakeConfig()) current = *c;
    const tuner::PolicyStatus st = policy.status();
    if (st.phase == tuner::Phase::kFrozen) {
      if (frozen_status) *frozen_status = st;
      return st.best;
    }
    if (st.phase == tuner::Phase::kOff) {
      throw std::runtime_error("autotune policy failed: " + st.error);
    }
    const double seconds = step.Seconds(current);
    now += seconds;
    policy.OnStep(bytes, seconds, now);
    for (tuner::PolicyEvent& e : policy.TakeEvents()) {
      if (samples && e.kind == tuner::PolicyEvent::Kind::kSample)
        samples->push_back(std::move(e));
    }
  }
  throw std::runtime_error("autotune policy did not freeze");
}

}  // namespace

std::vector<tuner::PriorSample> SourceSamples(const Problem& source,
                                              std::uint64_t seed, int budget) {
  std::vector<tuner::PolicyEvent> events;
  PolicyRun(source, seed, budget, {}, &events);
  std::vector<tuner::PriorSample> out;
  for (const tuner::PolicyEvent& e : events)
    if (e.phase != tuner::Phase::kFrozen) out.push_back({e.config, e.score});
  return out;
}

int SamplesToReach(const Problem& target, std::uint64_t seed, int budget,
                   const std::vector<tuner::PriorSample>& priors, double goal) {
  std::vector<tuner::PolicyEvent> events;
  PolicyRun(target, seed, budget, priors, &events);
  for (const tuner::PolicyEvent& e : events) {
    if (e.phase == tuner::Phase::kFrozen) break;
    if (target.Score(e.config) >= goal) return e.index;
  }
  return 0;
}

TuningCost CostOf(const Exploration& e, double best) {
  TuningCost c;
  double below_best = 0;
  for (const ExploredSample& s : e.samples) {
    // As the regret: a sample above f* costs nothing (f* is the best any
    // optimizer returned, not the best anything measured).
    below_best += std::max(0.0, (best - s.true_score) / best);
    c.loss_seconds += s.true_seconds * (1 - s.true_score / e.default_score);
  }
  if (!e.samples.empty()) c.explore_cost = below_best / e.samples.size();
  c.gain = e.frozen_score / e.default_score;
  if (c.loss_seconds <= 0) {
    c.payback_seconds = 0;
  } else if (c.gain <= 1) {
    c.payback_seconds = INFINITY;
  } else {
    c.payback_seconds = c.loss_seconds / (c.gain - 1);
  }
  return c;
}

Incumbents RunHvdtune(const Problem& p, std::uint64_t seed,
                      Exploration* at_cost_budget) {
  Incumbents out;
  for (int b : kCheckpoints) {
    if (b != kCostBudget || !at_cost_budget) {
      out.push_back(PolicyRun(p, seed, b));
      continue;
    }
    std::vector<tuner::PolicyEvent> events;
    Exploration e;
    out.push_back(PolicyRun(p, seed, b, {}, &events, &e.status));
    for (tuner::PolicyEvent& ev : events) {
      if (ev.phase != tuner::Phase::kExploring &&
          ev.phase != tuner::Phase::kRetuning)
        continue;
      const StepResult r = SimulateStep(p.preset(), p.scenario().cluster,
                                        p.workload(), p.Knobs(ev.config));
      e.samples.push_back({std::move(ev.config), ev.score, ev.seconds, ev.steps,
                           r.bytes_per_s, ev.steps * r.step_s});
    }
    e.default_score = p.Score(p.default_config());
    e.frozen_score = p.Score(out.back());
    *at_cost_budget = std::move(e);
  }
  return out;
}

Incumbents RunRandom(const Problem& p, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  NoisyStep step(p, seed);
  const auto pts = tuner::UniformRandom(40, p.space().num_continuous(),
                                        p.space().CategoryCounts(), rng);
  BestObserved best;
  Incumbents out;
  for (int n = 1; n <= 40; ++n) {
    // The first sample is the configuration in force, as for the tuner.
    const Config c =
        n == 1 ? p.default_config() : p.space().FromUnit(pts[n - 1]);
    best.Add(c, step.SampleScore(c));
    if (n == 10 || n == 20 || n == 40) out.push_back(best.config);
  }
  return out;
}

namespace {

// Horovod's scheme: the continuous knobs by GP + EI (xi 0.1, linear axes,
// one isotropic length scale, 4 random initial points), the categorical
// knobs one after another: each value of the first categorical knob gets a
// fresh GP and an equal share of the budget, the best value is kept, then
// the next knob; knobs not reached yet stay at their defaults.
Config HorovodRun(const Problem& p, std::uint64_t seed, int budget) {
  const tuner::SearchSpace& sp = p.space();
  const auto& cat = sp.categorical_indices();
  const std::vector<int> counts = sp.CategoryCounts();
  int phases = 0;
  for (int k : counts) phases += k;
  NoisyStep step(p, seed * 31 + budget);
  Config fixed = p.default_config();
  BestObserved overall;
  int used = 0, phase = 0;
  if (cat.empty()) phases = 1;
  for (std::size_t d = 0; d < std::max<std::size_t>(1, cat.size()); ++d) {
    double best_value_score = -INFINITY;
    int best_value = 0;
    const int values = cat.empty() ? 1 : counts[d];
    for (int v = 0; v < values; ++v, ++phase) {
      std::vector<tuner::Dimension> dims = sp.dimensions();
      for (std::size_t c = 0; c < cat.size(); ++c) {
        dims[cat[c]] = dims[cat[c]].Pinned(c == d ? v : fixed[cat[c]]);
      }
      for (auto& dim : dims) dim.log_scale = false;
      tuner::BayesOptSettings s;
      s.seed = seed * 7 + phase;
      s.initial_design_size = 4;
      s.latin_hypercube = false;
      s.gp.ard = false;
      s.gp.use_priors = false;
      s.acquisition.kind = tuner::AcquisitionKind::kExpectedImprovement;
      s.acquisition.xi = 0.1;
      s.acquisition.xi_noise = 0;  // plain EI, as Horovod
      s.num_anchors = 0;
      s.category_probe_period = 0;
      tuner::BayesianOptimizer opt{tuner::SearchSpace(dims), s};
      const int share = budget * (phase + 1) / phases - used;
      BestObserved local;
      for (int i = 0; i < share; ++i, ++used) {
        const Config c = opt.Suggest();
        const double score = step.SampleScore(c);
        opt.Observe(c, score);
        local.Add(c, score);
        overall.Add(c, score);
      }
      if (local.score > best_value_score)
        best_value_score = local.score, best_value = v;
    }
    if (!cat.empty()) fixed[cat[d]] = best_value;
  }
  return overall.config;
}

}  // namespace

Incumbents RunHorovodStyle(const Problem& p, std::uint64_t seed) {
  Incumbents out;
  for (int b : kCheckpoints) out.push_back(HorovodRun(p, seed, b));
  return out;
}

Incumbents RunDefault(const Problem& p, std::uint64_t) {
  return Incumbents(std::size(kCheckpoints), p.default_config());
}

const std::vector<std::string>& OptimizerNames() {
  static const std::vector<std::string> kNames = {"hvdtune", "random",
                                                  "horovod_style", "default"};
  return kNames;
}

Incumbents RunOptimizer(const std::string& name, const Problem& p,
                        std::uint64_t seed, Exploration* exploration) {
  if (name == "hvdtune") return RunHvdtune(p, seed, exploration);
  if (name == "random") return RunRandom(p, seed);
  if (name == "horovod_style") return RunHorovodStyle(p, seed);
  if (name == "default") return RunDefault(p, seed);
  throw std::invalid_argument("unknown optimizer '" + name + "'");
}

}  // namespace hvdtune::sim
