// The tuner's view of the knob table (part of hvdtune::runtime, which links
// the tuner): which knobs form the search space
// (the table's tune_as / tune_when, the user's pins, the layout) and the
// mapping between knob values and the tuner's configurations.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hvdtune/knobs.h"
#include "hvdtune/tuner/search_space.h"

namespace hvdtune {

class KnobSpace {
 public:
  /// What decides whether a knob of a given TuneWhen is tuned.
  struct Scope {
    /// The layout has more than one node.
    bool multi_node = false;
    /// The application groups its gradients.
    bool app_groups = false;
    /// The process may raise a thread's priority (the cycle thread's boost).
    bool priority_raisable = false;
    /// The engine: a categorical knob's choices it does not serve are left
    /// out of the search space.
    EngineKind engine = EngineKind::kMpi;
  };
  KnobSpace(const KnobConfig& knobs, const Scope& scope);
  /// Scope{multi_node, app_groups}: no priority knob.
  KnobSpace(const KnobConfig& knobs, bool multi_node, bool app_groups);

  bool empty() const { return ids_.empty(); }
  /// Valid only when !empty().
  const tuner::SearchSpace& space() const { return *space_; }
  std::vector<std::string> tuned_knobs() const;
  const std::vector<KnobId>& ids() const { return ids_; }

  tuner::Config ToConfig(const KnobSettings& values) const;
  /// `base` with the tuned knobs set from `config` (rounded and clamped
  /// to the table's ranges).
  KnobSettings FromConfig(const tuner::Config& config,
                          const KnobSettings& base) const;

 private:
  KnobSettings initial_;
  std::vector<KnobId> ids_;
  /// Per tuned knob (parallel to ids_): for a categorical knob, the choices
  /// the engine serves, the tuner's category c being choice served[c];
  /// empty otherwise.
  std::vector<std::vector<int>> served_;
  std::unique_ptr<tuner::SearchSpace> space_;
};

}  // namespace hvdtune
