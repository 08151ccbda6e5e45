#include "sweep_plan.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "common.h"
#include "hvdtune/knob_space.h"
#include "hvdtune/status.h"
#include "hvdtune/tuner/bayes_optimizer.h"
#include "hvdtune/tuner/initial_design.h"

namespace hvdtune::cli {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The "on" value of an on/off knob: the configured one, or the default when
// that is 0 (the tuner's rule).
double OnValue(const KnobSpec& spec, const KnobConfig& config) {
  const double v = config.values.Get(spec.id);
  return v > 0 ? v : spec.default_value;
}

double ParseAxisValue(const KnobSpec& spec, const KnobConfig& config,
                      std::string text) {
  if (spec.tune_as == TuneAs::kOnOff && (text == "on" || text == "off")) {
    return text == "on" ? OnValue(spec, config) : 0.0;
  }
  if (spec.type == KnobType::kInteger && !text.empty()) {
    const char suffix = text.back();
    const int shift = suffix == 'K'   ? 10
                      : suffix == 'M' ? 20
                      : suffix == 'G' ? 30
                                      : 0;
    if (shift > 0) {
      text.pop_back();
      const double v = ParseKnobValue(spec, text);
      return ParseKnobValue(
          spec, std::to_string(static_cast<std::int64_t>(v) << shift));
    }
  }
  return ParseKnobValue(spec, text);
}

class FixedPlan final : public SweepPlan {
 public:
  FixedPlan(std::vector<KnobSettings> points, int repeats, std::uint64_t seed) {
    points_ = std::move(points);
    std::mt19937_64 rng(seed);
    for (int r = 0; r < repeats; ++r) {
      std::vector<std::size_t> round(points_.size());
      for (std::size_t i = 0; i < round.size(); ++i) round[i] = i;
      std::shuffle(round.begin(), round.end(), rng);
      order_.insert(order_.end(), round.begin(), round.end());
    }
    total_visits_ = static_cast<int>(order_.size());
  }

  std::optional<std::size_t> Next() override {
    if (next_ == order_.size()) return std::nullopt;
    return order_[next_++];
  }
  void Observe(std::size_t, double) override {}

 private:
  std::vector<std::size_t> order_;
  std::size_t next_ = 0;
};

class BayesPlan final : public SweepPlan {
 public:
  static tuner::BayesOptSettings Settings(std::uint64_t seed, int budget) {
    tuner::BayesOptSettings s;
    s.seed = seed;
    s.max_evaluations = budget;
    return s;
  }

  BayesPlan(const KnobConfig& config, const KnobSpace::Scope& scope, int budget,
            int repeats, std::uint64_t seed)
      : space_(config, scope),
        initial_(config.values),
        budget_(budget),
        repeats_(repeats),
        optimizer_(space_.space(), Settings(seed, budget)) {
    optimizer_.SeedDesign({space_.ToConfig(initial_)});
    total_visits_ = budget * repeats;
  }

  std::optional<std::size_t> Next() override {
    if (!points_.empty() &&
        static_cast<int>(scores_.back().size()) < repeats_) {
      return points_.size() - 1;
    }
    if (static_cast<int>(points_.size()) == budget_) return std::nullopt;
    configs_.push_back(optimizer_.Suggest());
    points_.push_back(space_.FromConfig(configs_.back(), initial_));
    scores_.emplace_back();
    return points_.size() - 1;
  }

  void Observe(std::size_t i, double score) override {
    scores_[i].push_back(score);
    if (static_cast<int>(scores_[i].size()) != repeats_) return;
    std::vector<double> v = scores_[i];
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    optimizer_.Observe(configs_[i],
                       n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
  }

 private:
  KnobSpace space_;
  KnobSettings initial_;
  int budget_, repeats_;
  tuner::BayesianOptimizer optimizer_;
  std::vector<tuner::Config> configs_;
  std::vector<std::vector<double>> scores_;
};

std::vector<KnobSettings> GridPoints(const KnobSettings& base,
                                     const std::vector<GridAxis>& axes) {
  std::vector<KnobSettings> points = {base};
  for (const GridAxis& axis : axes) {
    std::vector<KnobSettings> next;
    for (const KnobSettings& p : points) {
      for (double v : axis.values) {
        KnobSettings q = p;
        q.Set(axis.id, v);
        next.push_back(q);
      }
    }
    points = std::move(next);
  }
  return points;
}

std::vector<KnobSettings> RandomPoints(const KnobConfig& config,
                                       const KnobSpace::Scope& scope, int count,
                                       std::uint64_t seed) {
  const KnobSpace space(config, scope);
  const tuner::SearchSpace& s = space.space();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::vector<int> categories = s.CategoryCounts();
  std::vector<KnobSettings> points = {config.values};
  while (static_cast<int>(points.size()) < count) {
    Eigen::VectorXd u(s.num_free());
    for (int i = 0; i < s.num_continuous(); ++i) u[i] = unit(rng);
    for (std::size_t c = 0; c < categories.size(); ++c) {
      std::uniform_int_distribution<int> pick(0, categories[c] - 1);
      u[s.num_continuous() + static_cast<int>(c)] = pick(rng);
    }
    points.push_back(space.FromConfig(s.FromUnit(u), config.values));
  }
  return points;
}

// The initial knobs, then `count` points: a maximin Latin hypercube over the
// continuous knobs (in the tuner's unit space, so log-scaled knobs are
// spread over their decades) and the categorical knobs' combinations taken
// in turn, shuffled against it, so no combination is left out while there
// are at least as many points as combinations.
std::vector<KnobSettings> LatinHypercubePoints(const KnobConfig& config,
                                               const KnobSpace::Scope& scope,
                                               int count, std::uint64_t seed) {
  const KnobSpace space(config, scope);
  const tuner::SearchSpace& s = space.space();
  std::mt19937_64 rng(seed);
  const std::vector<int> categories = s.CategoryCounts();
  std::vector<Eigen::VectorXd> unit =
      tuner::LatinHypercube(count, s.num_continuous(), categories, rng,
                            /*tries=*/50);
  int combinations = 1;
  for (int c : categories) combinations *= c;
  std::vector<int> turn(static_cast<std::size_t>(count));
  // Whole blocks of every combination, the last block a random part of one.
  std::vector<int> block(static_cast<std::size_t>(combinations));
  for (int i = 0; i < count; ++i) {
    if (i % combinations == 0) {
      for (int k = 0; k < combinations; ++k) block[k] = k;
      std::shuffle(block.begin(), block.end(), rng);
    }
    turn[i] = block[i % combinations];
  }
  std::shuffle(turn.begin(), turn.end(), rng);
  std::vector<KnobSettings> points = {config.values};
  for (int i = 0; i < count; ++i) {
    int rest = turn[i];
    for (std::size_t c = 0; c < categories.size(); ++c) {
      unit[i][s.num_continuous() + static_cast<int>(c)] = rest % categories[c];
      rest /= categories[c];
    }
    points.push_back(space.FromConfig(s.FromUnit(unit[i]), config.values));
  }
  return points;
}

}  // namespace

GridAxis ParseGridAxis(const std::string& text, const KnobConfig& config) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw UsageError("--grid: expected KNOB=V1,V2,..., got '" + text + "'");
  }
  const std::string name = text.substr(0, eq);
  const auto id = FindKnob(name);
  if (!id) throw UsageError("--grid: unknown knob '" + name + "'");
  if (config.pinned[static_cast<int>(*id)]) {
    throw UsageError("--grid: " + name + " is pinned by " +
                     std::string(GetKnobSpec(*id).env) +
                     " in the environment; unset it to sweep it");
  }
  GridAxis axis{*id, {}};
  std::stringstream in(text.substr(eq + 1));
  for (std::string v; std::getline(in, v, ',');) {
    try {
      axis.values.push_back(ParseAxisValue(GetKnobSpec(*id), config, v));
    } catch (const ConfigError& e) {
      throw UsageError("--grid: " + name + ": " + e.what());
    }
  }
  if (axis.values.empty()) throw UsageError("--grid: " + name + ": no values");
  return axis;
}

std::vector<GridAxis> DefaultGrid(const KnobConfig& config, bool multi_node) {
  std::vector<GridAxis> axes;
  auto add = [&](KnobId id, std::vector<double> values) {
    if (!config.pinned[static_cast<int>(id)]) axes.push_back({id, values});
  };
  add(KnobId::kFusionThreshold, {1 * kMiB, 16 * kMiB, 128 * kMiB});
  add(KnobId::kCycleTime, {0.2, 0.5, 2.0});
  std::vector<double> algorithms;
  for (std::size_t i = 0; i < AllreduceAlgorithms().size(); ++i) {
    algorithms.push_back(static_cast<double>(i));
  }
  add(KnobId::kAllreduceAlgorithm, algorithms);
  add(KnobId::kCacheCapacity,
      {OnValue(GetKnobSpec(KnobId::kCacheCapacity), config), 0.0});
  if (multi_node) add(KnobId::kHierarchicalAllgather, {0.0, 1.0});
  return axes;
}

std::unique_ptr<SweepPlan> MakePlan(const PlanSettings& settings,
                                    const KnobConfig& config) {
  if (settings.strategy == Strategy::kGrid) {
    std::vector<GridAxis> axes = settings.grid.empty()
                                     ? DefaultGrid(config, settings.multi_node)
                                     : settings.grid;
    if (axes.empty()) {
      throw UsageError(
          "--strategy grid: every knob of the default grid is pinned in the "
          "environment; give --grid KNOB=V1,V2");
    }
    std::vector<KnobSettings> points = GridPoints(config.values, axes);
    if (settings.budget > 0 &&
        settings.budget < static_cast<int>(points.size())) {
      // A budget below the grid's size: a random subset of the grid.
      std::mt19937_64 rng(settings.seed);
      std::shuffle(points.begin(), points.end(), rng);
      points.resize(static_cast<std::size_t>(settings.budget));
    }
    return std::make_unique<FixedPlan>(std::move(points), settings.repeats,
                                       settings.seed);
  }
  const KnobSpace::Scope scope{.multi_node = settings.multi_node,
                               .app_groups = false,
                               .priority_raisable = settings.priority_raisable};
  if (KnobSpace(config, scope).empty()) {
    throw UsageError(
        "--strategy: every tunable knob is pinned in the "
        "environment; nothing to sweep");
  }
  const int budget = settings.budget > 0 ? settings.budget : 20;
  if (settings.strategy == Strategy::kRandom) {
    return std::make_unique<FixedPlan>(
        RandomPoints(config, scope, budget, settings.seed), settings.repeats,
        settings.seed);
  }
  if (settings.strategy == Strategy::kLhs) {
    return std::make_unique<FixedPlan>(
        LatinHypercubePoints(config, scope, budget, settings.seed),
        settings.repeats, settings.seed);
  }
  return std::make_unique<BayesPlan>(config, scope, budget, settings.repeats,
                                     settings.seed);
}

std::vector<KnobId> VariedKnobs(const std::vector<KnobSettings>& points) {
  std::vector<KnobId> out;
  for (const KnobSpec& spec : KnobTable()) {
    for (const KnobSettings& p : points) {
      if (p.Get(spec.id) != points.front().Get(spec.id)) {
        out.push_back(spec.id);
        break;
      }
    }
  }
  return out;
}

}  // namespace hvdtune::cli
