// The configuration an exploration round of the autotune policy freezes on.
#pragma once

#include <cstddef>

#include "hvdtune/tuner/bayes_optimizer.h"

namespace hvdtune::tuner::internal {

/// Of the observations from `own_begin` on (this run's; earlier ones are
/// priors, never frozen on), the one with the highest posterior mean (the
/// highest observed score before a model exists). Then the round's first
/// configuration, observations()[own_begin] (the one in force when the
/// round began), is preferred where the model cannot tell: each categorical
/// value that differs from it is set back unless the model puts the change
/// more than `confidence` posterior standard deviations ahead, and the
/// first configuration itself is kept unless the result is that far ahead
/// of it. `score` is the observed one for a configuration measured in this
/// run, else the posterior mean.
Observation ChooseFrozen(const BayesianOptimizer& optimizer,
                         std::size_t own_begin, double confidence);

}  // namespace hvdtune::tuner::internal
