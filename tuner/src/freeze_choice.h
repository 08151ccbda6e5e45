// The configuration an exploration round of the autotune policy freezes on.
#pragma once

#include <cstddef>

#include "hvdtune/tuner/bayes_optimizer.h"

namespace hvdtune::tuner::internal {

/// The two configurations a round's freeze decides between, of the
/// observations from `own_begin` on (this run's; earlier ones are priors):
/// `leader`, the one with the highest posterior mean, and `candidate`, what
/// the round would freeze on given the model: the leader with every knob
/// whose value differs from the round's first configuration,
/// observations()[own_begin] (the one in force when the round began), set
/// back to that value, in the space's order, unless the model puts the
/// change more than `confidence` posterior standard deviations of
/// f(changed) - f(reverted) ahead (their covariance counted: the two share
/// most of their data). The candidate may be a configuration not measured
/// as such. Equal where every change is sure; without a fitted model both
/// are the observation with the highest observed score.
struct FreezeContenders {
  Config leader;
  Config candidate;
};
FreezeContenders FreezeContendersOf(const BayesianOptimizer& optimizer,
                                    std::size_t own_begin, double confidence);

/// How many of the observations from `own_begin` on measured `config`.
int TimesMeasured(const BayesianOptimizer& optimizer, std::size_t own_begin,
                  const Config& config);

/// What the round freezes on: always one of this run's observations (with
/// its observed score). The FreezeContenders candidate if it was measured,
/// else the measured configuration nearest to it (unit-space distance,
/// categorical mismatches counting 1), the highest posterior mean among
/// equals, of those the model does not put more than `confidence` standard
/// deviations of the difference behind the leader.
Observation ChooseFrozen(const BayesianOptimizer& optimizer,
                         std::size_t own_begin, double confidence);

/// Whether `config` is among the observations from `own_begin` on.
bool Measured(const BayesianOptimizer& optimizer, std::size_t own_begin,
              const Config& config);

}  // namespace hvdtune::tuner::internal
