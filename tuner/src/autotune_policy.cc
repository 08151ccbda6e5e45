#include "hvdtune/tuner/autotune_policy.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>
#include <utility>

#include "autotune_policy_state.h"

namespace hvdtune::tuner {

bool Estimate::has_interval() const {
  return std::isfinite(low) && std::isfinite(high);
}

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kOff:
      return "off";
    case Phase::kWarmup:
      return "warmup";
    case Phase::kExploring:
      return "exploring";
    case Phase::kFrozen:
      return "frozen";
    case Phase::kRetuning:
      return "retuning";
  }
  return "unknown";
}

namespace {}  // namespace

RobustSpread RobustSpreadOf(const std::vector<double>& values) {
  RobustSpread r;
  r.median = internal::Median(values);
  std::vector<double> deviation(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    deviation[i] = std::fabs(values[i] - r.median);
  }
  r.spread = 1.4826 * internal::Median(std::move(deviation));
  return r;
}

double MedianLogHalfWidth(const std::vector<double>& logs) {
  const std::size_t n = logs.size();
  if (n < 2) return std::numeric_limits<double>::infinity();
  // The median's standard error is 1.2533 times the mean's.
  const double spread = RobustSpreadOf(logs).spread;
  return internal::StudentT975(static_cast<int>(n) - 1) * 1.2533 * spread /
         std::sqrt(static_cast<double>(n));
}

bool SampleMayClose(const AutotunePolicySettings& s, long long steps,
                    double seconds, double half_width) {
  if (!(s.sample_precision > 0)) return true;
  const long long max_steps = s.max_steps_per_sample > 0
                                  ? s.max_steps_per_sample
                                  : 10LL * s.steps_per_sample;
  const bool capped = steps >= max_steps || (s.max_sample_seconds > 0 &&
                                             seconds >= s.max_sample_seconds);
  return capped || half_width <= std::log1p(s.sample_precision);
}

namespace {

// Throws std::invalid_argument unless `config` is a valid point of `space`.
void CheckInSpace(const SearchSpace& space, const Config& config,
                  const std::string& what) {
  Config valid;
  try {
    valid = space.MakeValid(config);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("AutotunePolicy: " + what + ": " + e.what());
  }
  for (std::size_t i = 0; i < config.size(); ++i) {
    if (valid[i] != config[i]) {
      throw std::invalid_argument(
          "AutotunePolicy: " + what + ": value " + std::to_string(config[i]) +
          " for '" + space.dimensions()[i].name +
          "' is outside the search space (nearest valid: " +
          std::to_string(valid[i]) + ")");
    }
  }
}

// A configuration from another run (a prior, a stored condition), clamped
// into `space`: other runs may have used other bounds. Throws
// std::invalid_argument naming `what` if it has the wrong size.
Config ClampFromOtherRun(const SearchSpace& space, const Config& config,
                         const std::string& what) {
  if (config.size() != space.size()) {
    throw std::invalid_argument(
        "AutotunePolicy: " + what + " has " + std::to_string(config.size()) +
        " values, the search space has " + std::to_string(space.size()));
  }
  try {
    return space.MakeValid(config);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("AutotunePolicy: " + what + ": " + e.what());
  }
}

void CheckSettings(const AutotunePolicySettings& s) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("AutotunePolicy: " + what);
  };
  if (s.warmup_samples < 0) fail("warmup_samples must be >= 0");
  if (s.steps_per_sample < 1) fail("steps_per_sample must be >= 1");
  if (s.max_samples < 1) fail("max_samples must be >= 1");
  if (!(std::isfinite(s.gaussian_process_noise) &&
        s.gaussian_process_noise > 0 &&
        std::pow(s.gaussian_process_noise / 10, 2) > 0)) {
    fail("gaussian_process_noise must be a positive finite number");
  }
  if (!(s.retune_drop >= 0 && s.retune_drop < 1)) {
    fail("retune_drop must be in [0, 1)");
  }
  if (s.retune_windows < 1) fail("retune_windows must be >= 1");
  if (!(s.sample_precision >= 0 && s.sample_precision <= 1)) {
    fail("sample_precision must be in [0, 1]");
  }
  if (!(s.watch_sample_seconds >= 0 && std::isfinite(s.watch_sample_seconds))) {
    fail("watch_sample_seconds must be a finite number >= 0");
  }
  if (!(s.max_sample_seconds >= 0 && std::isfinite(s.max_sample_seconds))) {
    fail("max_sample_seconds must be a finite number >= 0");
  }
  if (s.max_steps_per_sample != 0 &&
      s.max_steps_per_sample < s.steps_per_sample) {
    fail("max_steps_per_sample must be 0 or >= steps_per_sample");
  }
  if (!(s.exploit_share >= 0 && s.exploit_share <= 1)) {
    fail("exploit_share must be in [0, 1]");
  }
  if (!(s.freeze_confidence >= 0 && std::isfinite(s.freeze_confidence))) {
    fail("freeze_confidence must be a finite number >= 0");
  }
}

}  // namespace

AutotunePolicy::AutotunePolicy(SearchSpace space, PolicyStart start,
                               AutotunePolicySettings settings) {
  CheckSettings(settings);
  CheckInSpace(space, start.initial, "initial configuration");
  if (start.known_best) {
    CheckInSpace(space, *start.known_best, "known_best");
    if (!std::isfinite(start.known_best_score)) {
      throw std::invalid_argument(
          "AutotunePolicy: known_best_score is not finite");
    }
    if (start.confirm_samples < 1 && !start.freeze_on_known_best) {
      throw std::invalid_argument(
          "AutotunePolicy: confirm_samples must be >= 1");
    }
  } else if (start.freeze_on_known_best) {
    throw std::invalid_argument(
        "AutotunePolicy: freeze_on_known_best needs known_best");
  }
  for (std::size_t i = 0; i < start.priors.size(); ++i) {
    PriorSample& p = start.priors[i];
    const std::string what = "prior " + std::to_string(i);
    p.config = ClampFromOtherRun(space, p.config, what);
    if (!std::isfinite(p.score)) {
      throw std::invalid_argument("AutotunePolicy: " + what +
                                  " has a non-finite score");
    }
  }

  for (std::size_t i = 0; i < start.conditions.size(); ++i) {
    KnownCondition& c = start.conditions[i];
    const std::string what = "condition " + std::to_string(i + 1);
    c.config = ClampFromOtherRun(space, c.config, what);
    const bool scored = std::any_of(c.scores.begin(), c.scores.end(),
                                    [](double x) { return x > 0; });
    const bool finite = std::all_of(c.scores.begin(), c.scores.end(),
                                    [](double x) { return std::isfinite(x); });
    if (!scored || !finite) {
      throw std::invalid_argument(
          "AutotunePolicy: " + what +
          " needs a positive score and only finite ones");
    }
  }

  if (start.conditions.size() >= 2 && start.confirm_samples < 1 &&
      !start.freeze_on_known_best) {
    throw std::invalid_argument("AutotunePolicy: confirm_samples must be >= 1");
  }

  state_ =
      std::make_unique<State>(std::move(space), std::move(start), settings);
  State& s = *state_;
  s.current = s.start.initial;
  s.status.best = s.start.initial;
  s.warmup_left = std::max(1, settings.warmup_samples);
  Phase first = Phase::kWarmup;
  double first_score = 0;
  if (s.space.num_free() == 0) {
    first = Phase::kFrozen;
    s.never_retune = true;
  } else if (s.start.conditions.size() >= 2 && !s.start.freeze_on_known_best) {
    s.current = s.start.conditions.front().config;
    s.pending = s.current;
    s.status.best = s.current;
    s.confirming = true;
    s.walking_conditions = true;
  } else if (s.start.known_best) {
    s.current = *s.start.known_best;
    s.pending = s.current;
    s.status.best = s.current;
    if (s.start.freeze_on_known_best) {
      first = Phase::kFrozen;
      first_score = s.start.known_best_score;
      s.status.best_score = first_score;
      s.never_retune = true;
    } else {
      s.confirming = true;
    }
  }
  s.phase = Phase::kOff;
  s.SetPhase(first, s.current, first_score, 0);
  if (first == Phase::kFrozen) s.EnterFrozen();
  if (settings.asynchronous && first != Phase::kFrozen) {
    s.worker = std::thread([&s] { s.WorkerLoop(); });
  }
}

AutotunePolicy::~AutotunePolicy() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->work_cv.notify_all();
  if (state_->worker.joinable()) state_->worker.join();
}

void AutotunePolicy::OnStep(double bytes, double seconds, double now) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  // Under a configuration already scored, or straddling a switch.
  if (s.phase == Phase::kOff || s.busy || s.pending) return;
  if (s.skip_next_step) {
    s.skip_next_step = false;
    return;
  }
  if (!(bytes > 0 && seconds > 0)) return;
  const double score = bytes / seconds;
  if (!std::isfinite(score)) return;
  try {
    s.step_scores.push_back(score);
    s.step_seconds += seconds;
    const int n = static_cast<int>(s.step_scores.size());
    if (n < s.settings.steps_per_sample) return;
    State::SampleCost cost;
    cost.steps = n;
    cost.seconds = s.step_seconds;
    cost.precision = std::numeric_limits<double>::quiet_NaN();
    const double target = s.settings.sample_precision;
    const bool watching = s.phase == Phase::kFrozen ||
                          (s.phase == Phase::kWarmup && s.confirming);
    if (target > 0 && watching &&
        s.step_seconds < s.settings.watch_sample_seconds) {
      return;
    }
    if (target > 0 || n >= 2) {
      std::vector<double> logs(s.step_scores.size());
      std::transform(s.step_scores.begin(), s.step_scores.end(), logs.begin(),
                     [](double x) { return std::log(x); });
      const double half_width = MedianLogHalfWidth(logs);
      if (std::isfinite(half_width)) cost.precision = std::expm1(half_width);
      if (!SampleMayClose(s.settings, n, s.step_seconds, half_width)) return;
    }
    const double sample = internal::Median(s.step_scores);
    s.step_scores.clear();
    s.step_seconds = 0;
    std::optional<State::Job> job = s.FinishSample(sample, now, cost);
    if (!job) return;
    if (s.settings.asynchronous) {
      s.job = std::move(job);
      s.busy = true;
      s.work_cv.notify_one();
    } else {
      s.Publish(s.Run(*job));
    }
  } catch (const std::exception& e) {
    s.Fail(std::string("autotune policy failed: ") + e.what(), now);
  }
}

std::optional<Config> AutotunePolicy::TakeConfig() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.pending) return std::nullopt;
  std::optional<Config> out = std::move(s.pending);
  s.pending.reset();
  s.skip_next_step = true;
  return out;
}

std::vector<PolicyEvent> AutotunePolicy::TakeEvents() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<PolicyEvent> out(std::make_move_iterator(s.events.begin()),
                               std::make_move_iterator(s.events.end()));
  s.events.clear();
  return out;
}

PolicyStatus AutotunePolicy::status() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->status;
}

const SearchSpace& AutotunePolicy::space() const { return state_->space; }

bool AutotunePolicy::computing() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->busy;
}

void AutotunePolicy::WaitIdle() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->idle_cv.wait(lock, [&] { return !state_->busy; });
}

}  // namespace hvdtune::tuner
