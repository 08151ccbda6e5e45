// The configuration an exploration round of the autotune policy freezes on.
#pragma once

#include <cstddef>

#include "hvdtune/tuner/autotune_policy.h"
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

/// The round's choice with the keep-initial rule applied: ChooseFrozen()
/// (with `confidence`), unless that is not the configuration in force when
/// the round began (observations()[own_begin]) and neither the model puts
/// it more than max(`confidence`, `keep_confidence`) posterior standard
/// deviations of the difference ahead of it, nor its own samples are
/// clearly ahead of the initial ones (SamplesClearlyAhead): then that
/// initial observation. `kept_initial` (optional) says whether the round
/// froze on the initial configuration.
Observation ChooseFrozenOrInitial(const BayesianOptimizer& optimizer,
                                  std::size_t own_begin, double confidence,
                                  double keep_confidence,
                                  bool* kept_initial = nullptr);

/// Whether this run's samples of `a` are clearly ahead of those of `b`: at
/// least 2 of each, and the difference of their mean log scores above 0 by
/// more than t(0.975) standard errors (the two sets' pooled spread).
bool SamplesClearlyAhead(const BayesianOptimizer& optimizer,
                         std::size_t own_begin, const Config& a,
                         const Config& b);

/// The model's estimate of `config`'s score: the posterior mean of the
/// latent score given every observation (its own samples and those near
/// it), a 95% interval, and the samples of this run (from `own_begin` on)
/// that measured it. The interval spans the model's credible interval and
/// the one its own samples give alone (their mean log score, the model's
/// noise over sqrt(their number)): the model's pull towards neighbours
/// biases a configuration that differs from them. Without a fitted model: the
/// mean of those samples with a t interval (NaN bounds below 2 samples).
Estimate EstimateOf(const BayesianOptimizer& optimizer, std::size_t own_begin,
                    const Config& config);

/// The model's estimate of f(a) / f(b) - 1 with a 95% interval (the two
/// points' posterior covariance counted), widened as EstimateOf() to span
/// the ratio of their own samples' means. Without a model: that ratio
/// alone, with a t interval where each has 2 samples or more (else NaN
/// bounds).
Estimate GainOf(const BayesianOptimizer& optimizer, std::size_t own_begin,
                const Config& a, const Config& b);

/// Whether `config` is among the observations from `own_begin` on.
bool Measured(const BayesianOptimizer& optimizer, std::size_t own_begin,
              const Config& config);

}  // namespace hvdtune::tuner::internal
