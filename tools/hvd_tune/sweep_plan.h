// Which configurations a sweep measures, and in what order: a grid, random
// or space-filling (Latin hypercube) points of the tuner's own search
// space, or the tuner's Bayesian optimizer. Rank 0 alone plans; every visit is
// one scored sample.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hvdtune/knobs.h"

namespace hvdtune::cli {

enum class Strategy { kGrid, kRandom, kLhs, kBayes };

/// One knob of a grid and the values it takes.
struct GridAxis {
  KnobId id;
  std::vector<double> values;
};

/// "fusion_threshold=1M,16M,128M", "cycle_time=0.5,2",
/// "allreduce_algorithm=native,ring", "cache_capacity=on,off". Integer
/// values take K/M/G suffixes (powers of 1024); an on/off knob takes on and
/// off. Throws UsageError naming --grid.
GridAxis ParseGridAxis(const std::string& text, const KnobConfig& config);

/// The default grid: fusion threshold {1, 16, 128} MiB x cycle time {0.2, 0.5,
/// 2} ms x every allreduce algorithm x response cache {on, off} (x hierarchical
/// allgather {off, on} with more than one node); knobs the user pinned stay
/// out.
std::vector<GridAxis> DefaultGrid(const KnobConfig& config, bool multi_node);

class SweepPlan {
 public:
  virtual ~SweepPlan() = default;
  /// The next point to measure (an index into points()); nullopt when done.
  virtual std::optional<std::size_t> Next() = 0;
  /// One measured score of point `i`.
  virtual void Observe(std::size_t i, double score) = 0;
  /// Points so far (a Bayesian plan adds one per suggestion).
  const std::vector<KnobSettings>& points() const { return points_; }
  /// Visits in the whole plan (for progress and ETA).
  int total_visits() const { return total_visits_; }

 protected:
  std::vector<KnobSettings> points_;
  int total_visits_ = 0;
};

struct PlanSettings {
  Strategy strategy = Strategy::kGrid;
  /// Points (grid: at most this many of the grid, 0 = all of it).
  int budget = 0;
  int repeats = 3;
  std::uint64_t seed = 1;
  bool multi_node = false;
  /// The process may raise the cycle thread's priority: the boost is part
  /// of the tuner's space (with more than one node), as in a tuned job.
  bool priority_raisable = false;
  /// Grid only; empty = DefaultGrid().
  std::vector<GridAxis> grid;
};

/// Grid, random and Latin-hypercube plans visit every point `repeats`
/// times, one round after the other in a shuffled order each round (so slow
/// drifts of the machine spread over all points); a Bayesian plan measures
/// each suggestion `repeats` times in a row and tells the optimizer their
/// median. Random, Latin-hypercube and Bayesian plans start with the initial
/// knobs; a Latin-hypercube plan of budget n adds n points to them over
/// every knob the tuner would tune: each continuous knob has one point in
/// each 1/n of its (log or linear) tuning range, and the combinations of the
/// categorical knobs (algorithm, on/off knobs) take turns, so each
/// combination appears n / combinations times (+1 for some). Throws
/// UsageError when nothing is left to tune.
std::unique_ptr<SweepPlan> MakePlan(const PlanSettings& settings,
                                    const KnobConfig& config);

/// The knobs whose value differs between `points`, in table order.
std::vector<KnobId> VariedKnobs(const std::vector<KnobSettings>& points);

}  // namespace hvdtune::cli
