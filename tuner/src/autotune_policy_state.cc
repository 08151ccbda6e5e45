#include "autotune_policy_state.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>
#include <utility>

#include "freeze_choice.h"

namespace hvdtune::tuner {
namespace internal {

// t(0.975, dof): exact for few degrees of freedom, then the Cornish-Fisher
// expansion around the normal quantile (within 0.5% from 6 on).
double StudentT975(int dof) {
  static constexpr double kSmall[] = {12.706, 4.303, 3.182, 2.776, 2.571};
  if (dof <= 5) return kSmall[std::max(dof, 1) - 1];
  const double z = 1.959964, v = dof;
  return z + (z * z * z + z) / (4 * v) +
         (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * v * v);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

DriftReference DriftReferenceOf(const std::vector<double>& logs,
                                double retune_drop) {
  DriftReference r;
  const RobustSpread robust = RobustSpreadOf(logs);
  r.location = robust.median;
  // A drop of retune_drop is at least three of the floor, so a job quieter
  // than that still needs a drop of about retune_drop to re-tune.
  const double floor = RetuneDropLog(retune_drop) / 3.0;
  // A spread estimated from few samples is often far too small: widen it
  // by 1 + 2 / n (1.4 for the first 5 samples, 1.03 for 64).
  const double n = static_cast<double>(logs.size());
  const double mad = robust.spread * (1 + 2 / n);
  // The slow tail. On a loaded machine a sample now and then dips far
  // below the others (a neighbour's burst of load); the median absolute
  // deviation ignores such dips, and drops measured in it would count them
  // as evidence. The root mean square of the samples' distances below the
  // median, times sqrt(2) (for normal noise that is the sd), does not.
  double below = 0;
  for (double x : logs) {
    const double d = std::min(0.0, x - r.location);
    below += d * d;
  }
  // Only once the reference has kTailMinSamples: in a smaller one a single
  // low sample may be the start of a lasting drop, and counting it as
  // spread would hide the drop it begins.
  const double tail = logs.size() >= kTailMinSamples
                          ? std::sqrt(2 * below / n) * (1 + 2 / n)
                          : 0.0;
  r.scale = std::max({mad, tail, floor});
  return r;
}

Confirmation Confirm(const std::vector<double>& stored_logs,
                     double stored_score,
                     const std::vector<double>& confirm_logs,
                     double retune_drop, bool both_sides) {
  Confirmation c;
  if (confirm_logs.empty()) return c;
  const double confirmed = Median(confirm_logs);
  double reference = std::log(std::max(stored_score, 1e-300));
  double stored_se = 0;
  // One confirmation's spread: at least the floor the drift detector uses,
  // so two samples that happen to agree do not make it look exact.
  double sample_sd = RetuneDropLog(retune_drop) / 3.0;
  if (!stored_logs.empty() &&
      (stored_logs.size() >= kConfirmMinSamples || !(stored_score > 0))) {
    const DriftReference ref = DriftReferenceOf(stored_logs, retune_drop);
    reference = ref.location;
    sample_sd = std::max(sample_sd, ref.scale);
    stored_se = ref.scale / std::sqrt(static_cast<double>(stored_logs.size()));
  }
  if (confirm_logs.size() >= 2) {
    sample_sd = std::max(sample_sd, RobustSpreadOf(confirm_logs).spread);
  }
  const double tolerance =
      std::max(RetuneDropLog(retune_drop),
               kConfirmSpreads *
                   std::sqrt(stored_se * stored_se + sample_sd * sample_sd));
  const double moved = confirmed - reference;
  c.moved = std::expm1(moved);
  // The margin in the direction of the move, as a ratio: a fall of the
  // log tolerance is 1 - e^-t, a rise e^t - 1.
  c.tolerance = moved < 0 ? -std::expm1(-tolerance) : std::expm1(tolerance);
  c.log_sd = sample_sd / std::sqrt(static_cast<double>(confirm_logs.size()));
  c.confirmed =
      std::isfinite(moved) &&
      (both_sides ? std::fabs(moved) <= tolerance : moved >= -tolerance);
  return c;
}

double DriftIncrement(double z, const DriftReference& ref, double retune_drop) {
  const double slack =
      std::max(kDriftSlack, RetuneDropLog(retune_drop) / ref.scale);
  const double clip = std::max(kDriftClip, slack + 1);
  return (std::min(z, clip) - slack) / (clip - slack);
}

DriftCusum DriftStep(DriftCusum cusum, const DriftReference& ref,
                     double retune_drop, double log_score) {
  const double z = (ref.location - log_score) / ref.scale;
  cusum.drop = std::max(0.0, cusum.drop + DriftIncrement(z, ref, retune_drop));
  cusum.rise = std::max(0.0, cusum.rise + DriftIncrement(-z, ref, retune_drop));
  return cusum;
}

}  // namespace internal

void AutotunePolicy::State::Account(double score, double seconds) {
  const double initial = status.initial_score;
  if (!(initial > 0) || !(seconds > 0)) return;
  PolicyStatus& s = status;
  if (phase == Phase::kExploring || phase == Phase::kRetuning) {
    s.exploration_seconds += seconds;
    s.exploration_loss_seconds += seconds * (1 - score / initial);
    exploration_score_sum += score;
    ++exploration_scored;
    s.exploration_mean_score = exploration_score_sum / exploration_scored;
    if (s.frozen_gain_seconds < s.exploration_loss_seconds) {
      s.payback_seconds = -1;  // a re-tune lost more than was won back
    }
  } else if (phase == Phase::kFrozen) {
    s.frozen_seconds += seconds;
    s.frozen_gain_seconds += seconds * (score / initial - 1);
    if (s.payback_seconds < 0 &&
        s.frozen_gain_seconds >= s.exploration_loss_seconds) {
      s.payback_seconds =
          s.exploration_loss_seconds <= 0 ? 0 : s.frozen_seconds;
    }
  }
}

double AutotunePolicy::State::MeasuredNoise() const {
  return sample_log_se.empty() ? 0.0 : internal::Median(sample_log_se);
}

std::optional<AutotunePolicy::State::Job> AutotunePolicy::State::FinishSample(
    double score, double now, const SampleCost& cost) {
  Account(score, cost.seconds);
  ++status.total_samples;
  status.last_score = score;
  PolicyEvent& sample =
      Emit(PolicyEvent::Kind::kSample, phase, phase, current, score, now);
  sample.index = status.total_samples;
  sample.steps = cost.steps;
  sample.seconds = cost.seconds;
  sample.precision = cost.precision;
  if (phase != Phase::kFrozen && std::isfinite(cost.precision) &&
      cost.precision > 0 && cost.steps >= 2) {
    sample_log_se.push_back(std::log1p(cost.precision) /
                            internal::StudentT975(cost.steps - 1));
  }

  switch (phase) {
    case Phase::kOff:
      return std::nullopt;
    case Phase::kWarmup: {
      // The score the configuration in force is observed with.
      double in_force = score;
      if (confirming) {
        confirm_scores.push_back(score);
        if (static_cast<int>(confirm_scores.size()) < start.confirm_samples) {
          return std::nullopt;
        }
        const double confirmed = internal::Median(confirm_scores);
        std::vector<double> confirm_logs;
        for (double x : confirm_scores) {
          confirm_logs.push_back(std::log(std::max(x, 1e-300)));
        }
        confirm_scores.clear();
        // The stored best's confirmation is the initial score; with several
        // conditions tried, the best of them is the best so far.
        if (!walking_conditions || condition == 0) {
          status.initial_score = confirmed;
        }
        if (!walking_conditions || condition == 0 ||
            confirmed > status.best_score) {
          status.best_score = confirmed;
          status.best = current;
        }
        const std::size_t n_conditions =
            walking_conditions ? start.conditions.size() : 1;
        const internal::Confirmation check = ConfirmCurrent(confirm_logs);
        confirm_logs.clear();
        last_confirmation = check;
        if (check.confirmed) {
          status.best_score = confirmed;
          status.best = current;
          const double z = 1.959964 * check.log_sd;
          const double nan = std::numeric_limits<double>::quiet_NaN();
          status.best_estimate = {confirmed, confirmed * std::exp(-z),
                                  confirmed * std::exp(z),
                                  start.confirm_samples};
          status.initial_estimate = status.gain = {nan, nan, nan, 0};
          status.kept_initial = false;
          PolicyEvent& e = SetPhase(Phase::kFrozen, current, confirmed, now);
          e.condition = static_cast<int>(condition) + 1;
          e.conditions = static_cast<int>(n_conditions);
          e.estimate = status.best_estimate;
          e.initial = e.gain = status.initial_estimate;
          e.confirmation = true;
          e.confirm_moved = check.moved;
          e.confirm_tolerance = check.tolerance;
          EnterFrozen();
          return std::nullopt;
        }
        if (walking_conditions && condition + 1 < n_conditions) {
          // Not the conditions that one was stored under: the next.
          tried.push_back({current, confirmed});
          ++condition;
          current = start.conditions[condition].config;
          pending = current;
          return std::nullopt;
        }
        in_force = confirmed;
      } else {
        status.initial_score = score;
        status.best_score = score;
        if (--warmup_left > 0) return std::nullopt;
      }
      // The configuration in force is observed last, after those of the
      // stored conditions tried before it.
      PolicyEvent& explore =
          SetPhase(Phase::kExploring, current, status.initial_score, now);
      if (confirming) {
        // Says by how much the stored best missed.
        explore.confirmation = true;
        explore.confirm_moved = last_confirmation.moved;
        explore.confirm_tolerance = last_confirmation.tolerance;
        explore.condition = 0;
      }
      status.exploration_samples = round_samples =
          1 + static_cast<int>(tried.size());
      Job job;
      job.kind = Job::Kind::kStart;
      job.noise = MeasuredNoise();
      job.config = current;
      job.score = in_force;
      job.tried = tried;
      job.time = now;
      job.seed = settings.seed;
      job.round_samples = round_samples;
      job.budget = RoundBudget();
      return job;
    }
    case Phase::kExploring:
    case Phase::kRetuning: {
      ++status.exploration_samples;
      ++round_samples;
      Job job;
      job.kind = Job::Kind::kObserve;
      job.noise = MeasuredNoise();
      job.config = current;
      job.score = score;
      job.time = now;
      job.round_samples = round_samples;
      job.budget = RoundBudget();
      return job;
    }
    case Phase::kFrozen: {
      // Drift: two one-sided CUSUMs on log scores (a fall and a rise),
      // standardised by the frozen samples' own median and spread
      // (internal::DriftReferenceOf). The first kDriftBaseline samples only
      // make the reference; a sample joins it (the last kDriftWindow) once
      // both CUSUMs are back at zero, so the reference follows this job's
      // noise and slow changes. A rise counts too: the conditions the
      // configuration was chosen for have changed (a faster link), and
      // another may now be best.
      ++frozen_windows;
      if (never_retune || settings.retune_drop <= 0) return std::nullopt;
      const double x = std::log(std::max(score, 1e-300));
      if (frozen_logs.size() < internal::kDriftBaseline) {
        frozen_logs.push_back(x);
        return std::nullopt;
      }
      const internal::DriftReference ref =
          internal::DriftReferenceOf(frozen_logs, settings.retune_drop);
      drift_cusum =
          internal::DriftStep(drift_cusum, ref, settings.retune_drop, x);
      // Samples of an excursion (a CUSUM above zero) join the reference
      // only once it ended without an alarm: leaving out every low sample
      // would raise the reference and narrow its spread until noise
      // re-tunes.
      drift_pending.push_back(x);
      if (drift_cusum.Quiet()) {
        frozen_logs.insert(frozen_logs.end(), drift_pending.begin(),
                           drift_pending.end());
        drift_pending.clear();
        if (frozen_logs.size() > internal::kDriftWindow) {
          frozen_logs.erase(frozen_logs.begin(),
                            frozen_logs.end() - internal::kDriftWindow);
        }
      }
      const double threshold =
          internal::DriftThreshold(settings.retune_windows);
      if (drift_cusum.drop <= threshold && drift_cusum.rise <= threshold) {
        return std::nullopt;
      }
      const double reference = std::exp(ref.location);
      SetPhase(Phase::kRetuning, current, score, now).reference = reference;
      ++status.retunes;
      frozen_logs.clear();
      drift_pending.clear();
      drift_cusum = {};
      round_samples = 1;
      Job job;
      job.kind = Job::Kind::kRetune;
      job.noise = MeasuredNoise();
      job.config = current;
      job.score = score;
      job.reference = reference;
      job.time = now;
      job.seed = settings.seed +
                 static_cast<std::uint64_t>(status.exploration_samples);
      job.round_samples = round_samples;
      job.budget = RoundBudget();
      return job;
    }
  }
  return std::nullopt;
}

internal::Confirmation AutotunePolicy::State::ConfirmCurrent(
    const std::vector<double>& confirm_logs) const {
  std::vector<double> stored;
  if (walking_conditions) {
    // The condition's frozen samples, either way: a confirmation far above
    // them was measured under other conditions as much as one far below.
    for (double x : start.conditions[condition].scores) {
      if (x > 0 && std::isfinite(x)) stored.push_back(std::log(x));
    }
    if (stored.empty()) return {};
    return internal::Confirm(stored, 0, confirm_logs, settings.retune_drop,
                             /*both_sides=*/true);
  }
  // The stored run's own samples of the stored best, where there are
  // enough, say how much its score varied.
  for (const PriorSample& p : start.priors) {
    if (p.config == *start.known_best && p.score > 0) {
      stored.push_back(std::log(p.score));
    }
  }
  return internal::Confirm(stored, start.known_best_score, confirm_logs,
                           settings.retune_drop, /*both_sides=*/false);
}

AutotunePolicy::State::Result AutotunePolicy::State::Decide(const Job& job) {
  Result r;
  r.time = job.time;
  if (job.round_samples >= job.budget || optimizer->ShouldStop()) {
    const Observation best = internal::ChooseFrozenOrInitial(
        *optimizer, own_begin, settings.freeze_confidence,
        settings.keep_initial_confidence, &r.kept_initial);
    const Config& initial = optimizer->observations()[own_begin].config;
    r.kind = Result::Kind::kFreeze;
    r.config = best.config;
    // What the policy says and stores is the model's estimate from every
    // sample, never the chosen configuration's luckiest one.
    r.estimate = internal::EstimateOf(*optimizer, own_begin, best.config);
    r.initial = internal::EstimateOf(*optimizer, own_begin, initial);
    r.gain = internal::GainOf(*optimizer, own_begin, best.config, initial);
    r.score = std::isfinite(r.estimate.mean) && r.estimate.mean > 0
                  ? r.estimate.mean
                  : best.score;
    return r;
  }
  r.kind = Result::Kind::kSuggest;
  // In the refining tail, the configuration the round would freeze on is
  // measured first if it has not been (it may differ from every sample in
  // the knobs set back to their initial values), so that the freeze picks
  // it from what was measured. While it still differs from the best-scoring
  // configuration (the model is not sure the knobs set back matter), the
  // tail measures the two in turn, the less measured first: a difference
  // smaller than one sample's noise is then decided by repeated samples of
  // both, not by the model's reach from their neighbours.
  if (job.round_samples >= job.budget - ExploitTail(job.budget) &&
      settings.freeze_confidence > 0) {
    internal::FreezeContenders c = internal::FreezeContendersOf(
        *optimizer, own_begin, settings.freeze_confidence);
    if (!internal::Measured(*optimizer, own_begin, c.candidate)) {
      r.config = std::move(c.candidate);
      return r;
    }
    if (c.leader != c.candidate) {
      const int leader_n =
          internal::TimesMeasured(*optimizer, own_begin, c.leader);
      const int candidate_n =
          internal::TimesMeasured(*optimizer, own_begin, c.candidate);
      const bool leader_next =
          leader_n != candidate_n
              ? leader_n < candidate_n
              : optimizer->observations().back().config != c.leader;
      r.config = leader_next ? std::move(c.leader) : std::move(c.candidate);
      return r;
    }
  }
  r.config = optimizer->Suggest();
  if (!space.IsValid(r.config)) {
    throw std::logic_error("the optimizer suggested an invalid configuration");
  }
  return r;
}

AutotunePolicy::State::Result AutotunePolicy::State::Run(const Job& job) {
  try {
    switch (job.kind) {
      case Job::Kind::kStart:
        optimizer = std::make_unique<BayesianOptimizer>(
            space,
            OptimizerSettings(job.seed, start.priors.size(), job.budget));
        for (const PriorSample& p : start.priors) {
          optimizer->Observe(p.config, p.score);
        }
        own_begin = start.priors.size();
        optimizer->SetRelativeNoiseFloor(job.noise);
        for (const PriorSample& p : job.tried) {
          optimizer->Observe(p.config, p.score);
        }
        optimizer->Observe(job.config, job.score);
        break;
      case Job::Kind::kObserve:
        optimizer->SetRelativeNoiseFloor(job.noise);
        optimizer->Observe(job.config, job.score);
        break;
      case Job::Kind::kRetune: {
        // A new model under the new conditions. The last round's own
        // observations come over as priors, scaled by how far the
        // incumbent moved (its score now against the frozen samples'
        // median): they keep the shape of the surface, the new samples
        // say where it changed. Only configurations measured under the new
        // conditions can be frozen on (own_begin). The incumbent under
        // today's conditions is the round's first sample.
        std::vector<Observation> old;
        if (optimizer) {
          const auto& seen = optimizer->observations();
          old.assign(seen.begin() + static_cast<std::ptrdiff_t>(
                                        std::min(own_begin, seen.size())),
                     seen.end());
        }
        const double scale =
            job.reference > 0 && job.score > 0 ? job.score / job.reference : 1;
        optimizer = std::make_unique<BayesianOptimizer>(
            space, OptimizerSettings(job.seed, old.size(), job.budget));
        for (const Observation& o : old) {
          optimizer->Observe(o.config, o.score * scale);
        }
        own_begin = old.size();
        optimizer->SetRelativeNoiseFloor(job.noise);
        optimizer->Observe(job.config, job.score);
        break;
      }
    }
    return Decide(job);
  } catch (const std::exception& e) {
    Result r;
    r.kind = Result::Kind::kError;
    r.time = job.time;
    r.message = std::string("autotune optimizer failed: ") + e.what();
    return r;
  } catch (...) {
    Result r;
    r.kind = Result::Kind::kError;
    r.time = job.time;
    r.message = "autotune optimizer failed: unknown exception";
    return r;
  }
}

void AutotunePolicy::State::Publish(const Result& r) {
  if (phase == Phase::kOff) return;
  switch (r.kind) {
    case Result::Kind::kSuggest:
      current = r.config;
      pending = r.config;
      return;
    case Result::Kind::kFreeze: {
      status.best = r.config;
      status.best_score = r.score;
      status.best_estimate = r.estimate;
      status.initial_estimate = r.initial;
      status.gain = r.gain;
      status.kept_initial = r.kept_initial;
      PolicyEvent& e = SetPhase(Phase::kFrozen, r.config, r.score, r.time);
      e.estimate = r.estimate;
      e.initial = r.initial;
      e.gain = r.gain;
      e.kept_initial = r.kept_initial;
      EnterFrozen();
      current = r.config;
      pending = r.config;
      return;
    }
    case Result::Kind::kError:
      Fail(r.message, r.time);
      return;
  }
}

void AutotunePolicy::State::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    work_cv.wait(lock, [&] { return stop || job.has_value(); });
    if (stop) return;
    const Job todo = std::move(*job);
    job.reset();
    lock.unlock();
    const Result result = Run(todo);
    lock.lock();
    Publish(result);
    busy = false;
    idle_cv.notify_all();
  }
}

}  // namespace hvdtune::tuner
