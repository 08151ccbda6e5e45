#include "hvdtune/knob_space.h"

#include <algorithm>
#include <cmath>

namespace hvdtune {
namespace {

bool InScope(const KnobSpec& spec, const KnobSpace::Scope& scope) {
  switch (spec.tune_when) {
    case TuneWhen::kAlways:
      return true;
    case TuneWhen::kMultiNode:
      return scope.multi_node;
    case TuneWhen::kAppGroups:
      return scope.app_groups;
    case TuneWhen::kMultiNodeRaisablePriority:
      return scope.multi_node && scope.priority_raisable;
  }
  return false;
}

int NumChoices(const KnobSpec& spec) {
  return spec.type == KnobType::kBool ? 2
                                      : static_cast<int>(spec.choices.size());
}

}  // namespace

KnobSpace::KnobSpace(const KnobConfig& knobs, bool multi_node, bool app_groups)
    : KnobSpace(knobs,
                Scope{.multi_node = multi_node, .app_groups = app_groups}) {}

KnobSpace::KnobSpace(const KnobConfig& knobs, const Scope& scope)
    : initial_(knobs.values) {
  std::vector<tuner::Dimension> dims;
  for (const KnobSpec& spec : KnobTable()) {
    if (!spec.tunable() || knobs.pinned[static_cast<int>(spec.id)] ||
        !InScope(spec, scope)) {
      continue;
    }
    const std::string name(spec.name);
    switch (spec.tune_as) {
      case TuneAs::kNever:
        continue;
      case TuneAs::kOnOff:
        dims.push_back(tuner::Dimension::Categorical(name, 2));
        break;
      case TuneAs::kChoice:
        if (NumChoices(spec) < 2) continue;
        dims.push_back(tuner::Dimension::Categorical(name, NumChoices(spec)));
        break;
      case TuneAs::kRange:
        // Small linear integer ranges (num_groups) are integer axes; byte
        // counts over decades are continuous on a log axis and rounded.
        dims.push_back(
            spec.type == KnobType::kInteger && spec.scale == KnobScale::kLinear
                ? tuner::Dimension::Integer(name, spec.tune_min, spec.tune_max,
                                            false)
                : tuner::Dimension::Continuous(name, spec.tune_min,
                                               spec.tune_max,
                                               spec.scale == KnobScale::kLog));
        break;
    }
    ids_.push_back(spec.id);
  }
  if (!dims.empty()) {
    space_ = std::make_unique<tuner::SearchSpace>(std::move(dims));
  }
}

std::vector<std::string> KnobSpace::tuned_knobs() const {
  std::vector<std::string> out;
  for (KnobId id : ids_) out.emplace_back(GetKnobSpec(id).name);
  return out;
}

tuner::Config KnobSpace::ToConfig(const KnobSettings& k) const {
  tuner::Config c;
  for (KnobId id : ids_) {
    const KnobSpec& spec = GetKnobSpec(id);
    const double v = k.Get(id);
    switch (spec.tune_as) {
      case TuneAs::kOnOff:
        c.push_back(v > 0 ? 1.0 : 0.0);
        break;
      case TuneAs::kChoice:
        c.push_back(v);
        break;
      default:
        c.push_back(std::clamp(v, spec.tune_min, spec.tune_max));
    }
  }
  return c;
}

KnobSettings KnobSpace::FromConfig(const tuner::Config& c,
                                   const KnobSettings& base) const {
  KnobSettings k = base;
  for (std::size_t i = 0; i < ids_.size() && i < c.size(); ++i) {
    const KnobId id = ids_[i];
    const KnobSpec& spec = GetKnobSpec(id);
    double v = c[i];
    if (spec.tune_as == TuneAs::kOnOff) {
      // On = the configured value, else the default, else tune_max.
      const double on = initial_.Get(id) > 0     ? initial_.Get(id)
                        : spec.default_value > 0 ? spec.default_value
                                                 : spec.tune_max;
      v = v >= 0.5 ? on : 0.0;
    } else if (spec.type != KnobType::kFloat) {
      v = std::round(v);
    }
    k.Set(id, std::clamp(v, spec.min_value, spec.max_value));
  }
  return k;
}

}  // namespace hvdtune
