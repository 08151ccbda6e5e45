#include "hvdtune/tuner/autotune_policy.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>
#include <utility>

#include "freeze_choice.h"

namespace hvdtune::tuner {

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

namespace {

// Events kept for a caller that does not take them; beyond this the oldest
// are dropped (and counted) rather than growing without bound.
constexpr std::size_t kMaxQueuedEvents = 10000;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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
  if (!(s.exploit_share >= 0 && s.exploit_share <= 1)) {
    fail("exploit_share must be in [0, 1]");
  }
  if (!(s.freeze_confidence >= 0 && std::isfinite(s.freeze_confidence))) {
    fail("freeze_confidence must be a finite number >= 0");
  }
}

}  // namespace

struct AutotunePolicy::State {
  // Work handed to the optimizer (the worker thread, or OnStep itself when
  // synchronous). Everything it needs is copied in: the worker reads no
  // other mutable state.
  struct Job {
    enum class Kind {
      kStart,    // new optimizer, priors, then `config` with `score`
      kObserve,  // `config` scored `score` in the current round
      kRetune,   // new optimizer seeded with `seed`, incumbent first
    };
    Kind kind = Kind::kObserve;
    Config config;
    double score = 0;
    double time = 0;
    std::uint64_t seed = 0;
    int round_samples = 0;  // samples of this round, this one included
    int budget = 0;         // samples the round may take
  };
  struct Result {
    enum class Kind { kSuggest, kFreeze, kError };
    Kind kind = Kind::kSuggest;
    Config config;
    double score = 0;
    double time = 0;
    std::string message;
  };

  State(SearchSpace s, PolicyStart st, AutotunePolicySettings se)
      : space(std::move(s)), start(std::move(st)), settings(se) {}

  // --- immutable after construction ---
  const SearchSpace space;
  const PolicyStart start;
  const AutotunePolicySettings settings;

  // --- worker-only (or OnStep when synchronous) ---
  std::unique_ptr<BayesianOptimizer> optimizer;
  // Observations before this index came from other runs (priors): the
  // model learns from them, but the policy freezes only on something it
  // measured itself, on this run's scale.
  std::size_t own_begin = 0;

  // --- shared, guarded by `mu` ---
  mutable std::mutex mu;
  std::condition_variable work_cv;  // a job was queued, or stop
  std::condition_variable idle_cv;  // the worker finished a job
  std::optional<Job> job;
  bool busy = false;
  bool stop = false;

  Phase phase = Phase::kWarmup;
  bool confirming = false;  // warm-up scores `start.known_best`
  bool never_retune = false;
  int warmup_left = 0;
  std::vector<double> confirm_scores;
  std::vector<double> step_scores;
  bool skip_next_step = false;
  std::optional<Config> pending;
  Config current;  // in force, or handed out and about to be
  int round_samples = 0;
  int frozen_windows = 0;
  int degraded_windows = 0;
  double frozen_reference = 0;
  PolicyStatus status;
  std::deque<PolicyEvent> events;

  std::thread worker;

  void Emit(PolicyEvent e) {
    if (events.size() >= kMaxQueuedEvents) {
      events.pop_front();
      ++status.dropped_events;
    }
    events.push_back(std::move(e));
  }
  void EmitPhaseChange(Phase from, Phase to, const Config& config, double score,
                       double time) {
    PolicyEvent e;
    e.kind = PolicyEvent::Kind::kPhaseChange;
    e.previous_phase = from;
    e.phase = to;
    e.config = config;
    e.score = score;
    e.time = time;
    Emit(std::move(e));
  }
  void SetPhase(Phase to, const Config& config, double score, double time) {
    const Phase from = phase;
    phase = to;
    status.phase = to;
    EmitPhaseChange(from, to, config, score, time);
  }
  void Fail(const std::string& message, double time) {
    const Phase from = phase;
    PolicyEvent e;
    e.kind = PolicyEvent::Kind::kError;
    e.previous_phase = from;
    e.phase = Phase::kOff;
    e.config = current;
    e.time = time;
    e.message = message;
    Emit(std::move(e));
    status.error = message;
    pending.reset();
    SetPhase(Phase::kOff, current, status.last_score, time);
  }
  void EnterFrozen() {
    frozen_windows = 0;
    degraded_windows = 0;
    frozen_reference = 0;
  }

  int RoundBudget() const {
    return phase == Phase::kRetuning ? std::max(4, settings.max_samples / 2)
                                     : settings.max_samples;
  }

  // Caller's side, under `mu`: books a finished sample; returns the
  // optimizer work it calls for, if any.
  std::optional<Job> FinishSample(double score, double now);
  // The optimizer work; no locking, no shared state but the optimizer.
  Result Run(const Job& job);
  // Caller's or worker's side, under `mu`: applies what the optimizer said.
  void Publish(const Result& result);
  void WorkerLoop();

  // Samples at the end of a round of `budget` spent refining (0: none).
  int ExploitTail(int budget) const {
    const int tail =
        static_cast<int>(std::lround(settings.exploit_share * budget));
    return tail > 0 && tail < budget ? tail : 0;
  }
  // `begin`: observations before the round's first (priors); `budget`:
  // the round's samples, that first one included.
  BayesOptSettings OptimizerSettings(std::uint64_t seed, std::size_t begin,
                                     int budget) const {
    BayesOptSettings bo = settings.optimizer;
    bo.seed = seed;
    const int tail = ExploitTail(budget);
    if (tail > 0) {
      bo.exploit_from = static_cast<int>(begin) + budget - tail;
    }
    bo.gp.noise_floor = std::pow(settings.gaussian_process_noise / 10, 2);
    return bo;
  }
  // What the round freezes on (freeze_choice.h).
  Observation Incumbent() const;
  Result Decide(const Job& job);
};

std::optional<AutotunePolicy::State::Job> AutotunePolicy::State::FinishSample(
    double score, double now) {
  ++status.total_samples;
  status.last_score = score;
  PolicyEvent sample;
  sample.kind = PolicyEvent::Kind::kSample;
  sample.index = status.total_samples;
  sample.phase = phase;
  sample.previous_phase = phase;
  sample.config = current;
  sample.score = score;
  sample.time = now;
  Emit(std::move(sample));

  switch (phase) {
    case Phase::kOff:
      return std::nullopt;
    case Phase::kWarmup: {
      if (confirming) {
        confirm_scores.push_back(score);
        if (static_cast<int>(confirm_scores.size()) < start.confirm_samples) {
          return std::nullopt;
        }
        const double confirmed = Median(confirm_scores);
        status.initial_score = confirmed;
        status.best_score = confirmed;
        status.best = current;
        if (confirmed >=
            (1.0 - settings.retune_drop) * start.known_best_score) {
          SetPhase(Phase::kFrozen, current, confirmed, now);
          EnterFrozen();
          return std::nullopt;
        }
      } else {
        status.initial_score = score;
        status.best_score = score;
        if (--warmup_left > 0) return std::nullopt;
      }
      SetPhase(Phase::kExploring, current, status.initial_score, now);
      status.exploration_samples = round_samples = 1;
      Job job;
      job.kind = Job::Kind::kStart;
      job.config = current;
      job.score = status.initial_score;
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
      job.config = current;
      job.score = score;
      job.time = now;
      job.round_samples = round_samples;
      job.budget = RoundBudget();
      return job;
    }
    case Phase::kFrozen: {
      if (++frozen_windows == 1) {
        frozen_reference = score;
        return std::nullopt;
      }
      if (never_retune || settings.retune_drop <= 0) return std::nullopt;
      if (score < (1.0 - settings.retune_drop) * frozen_reference) {
        ++degraded_windows;
      } else {
        degraded_windows = 0;
        // Track slow improvements too, so the reference stays current.
        frozen_reference = std::max(frozen_reference, score);
      }
      if (degraded_windows < settings.retune_windows) return std::nullopt;
      SetPhase(Phase::kRetuning, current, score, now);
      ++status.retunes;
      degraded_windows = 0;
      round_samples = 1;
      Job job;
      job.kind = Job::Kind::kRetune;
      job.config = current;
      job.score = score;
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

Observation AutotunePolicy::State::Incumbent() const {
  return internal::ChooseFrozen(*optimizer, own_begin,
                                settings.freeze_confidence);
}

AutotunePolicy::State::Result AutotunePolicy::State::Decide(const Job& job) {
  Result r;
  r.time = job.time;
  if (job.round_samples >= job.budget || optimizer->ShouldStop()) {
    const Observation best = Incumbent();
    r.kind = Result::Kind::kFreeze;
    r.config = best.config;
    r.score = best.score;
    return r;
  }
  r.kind = Result::Kind::kSuggest;
  // In the refining tail, the configuration the round would freeze on is
  // measured first if it has not been (it may differ from every sample in
  // the knobs set back to their initial values), so that the freeze picks
  // it from what was measured.
  if (job.round_samples >= job.budget - ExploitTail(job.budget) &&
      settings.freeze_confidence > 0) {
    Config candidate = internal::FreezeCandidate(*optimizer, own_begin,
                                                 settings.freeze_confidence);
    if (!internal::Measured(*optimizer, own_begin, candidate)) {
      r.config = std::move(candidate);
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
        optimizer->Observe(job.config, job.score);
        break;
      case Job::Kind::kObserve:
        optimizer->Observe(job.config, job.score);
        break;
      case Job::Kind::kRetune:
        // A fresh model: the old observations describe conditions that no
        // longer hold. The incumbent under today's conditions comes first.
        optimizer = std::make_unique<BayesianOptimizer>(
            space, OptimizerSettings(job.seed, 0, job.budget));
        own_begin = 0;
        optimizer->Observe(job.config, job.score);
        break;
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
    case Result::Kind::kFreeze:
      status.best = r.config;
      status.best_score = r.score;
      SetPhase(Phase::kFrozen, r.config, r.score, r.time);
      EnterFrozen();
      current = r.config;
      pending = r.config;
      return;
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
    if (p.config.size() != space.size()) {
      throw std::invalid_argument("AutotunePolicy: " + what + " has " +
                                  std::to_string(p.config.size()) +
                                  " values, the search space has " +
                                  std::to_string(space.size()));
    }
    try {
      // Other runs may have used other bounds: clamp rather than reject.
      p.config = space.MakeValid(p.config);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("AutotunePolicy: " + what + ": " + e.what());
    }
    if (!std::isfinite(p.score)) {
      throw std::invalid_argument("AutotunePolicy: " + what +
                                  " has a non-finite score");
    }
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
    if (static_cast<int>(s.step_scores.size()) < s.settings.steps_per_sample) {
      return;
    }
    const double sample = Median(s.step_scores);
    s.step_scores.clear();
    std::optional<State::Job> job = s.FinishSample(sample, now);
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
