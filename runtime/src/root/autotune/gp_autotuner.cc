// Rank 0's online autotuner: meters steps from the event stream and drives
// the tuner's generic autotune policy over a search space built from the
// knob table. The policy runs the optimizer on its own thread.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "hvdtune/knob_space.h"
#include "hvdtune/services.h"
#include "hvdtune/tuner/autotune_policy.h"
#include "root/autotune/throughput_meter.h"

namespace hvdtune::internal {
namespace {

ScoreEstimate ToEstimate(const tuner::Estimate& e) {
  return {e.mean, e.low, e.high, e.samples};
}

AutotunePhase ToPhase(tuner::Phase p) {
  switch (p) {
    case tuner::Phase::kOff:
      return AutotunePhase::kOff;
    case tuner::Phase::kWarmup:
      return AutotunePhase::kWarmup;
    case tuner::Phase::kExploring:
      return AutotunePhase::kExploring;
    case tuner::Phase::kFrozen:
      return AutotunePhase::kFrozen;
    case tuner::Phase::kRetuning:
      return AutotunePhase::kRetuning;
  }
  return AutotunePhase::kOff;
}

class GpAutotuner final : public Autotuner {
 public:
  explicit GpAutotuner(const TuningContext& ctx)
      : ctx_(ctx),
        space_(ctx.knobs,
               KnobSpace::Scope{.multi_node = ctx.info.cross_size > 1,
                                .app_groups = ctx.tune_num_groups,
                                .priority_raisable = ctx.priority_raisable,
                                .engine = ctx.info.engine}) {
    settings_.warmup_samples = ctx.settings.warmup_samples;
    settings_.steps_per_sample = ctx.settings.steps_per_sample;
    settings_.sample_precision = ctx.settings.sample_precision;
    settings_.max_sample_seconds = ctx.settings.max_sample_seconds;
    settings_.max_steps_per_sample = ctx.settings.max_steps_per_sample;
    settings_.watch_sample_seconds = ctx.settings.watch_sample_seconds;
    settings_.max_samples = ctx.settings.max_samples;
    settings_.gaussian_process_noise = ctx.settings.gaussian_process_noise;
    settings_.retune_drop = ctx.settings.retune_drop;
    settings_.retune_windows = ctx.settings.retune_windows;
    settings_.seed = ctx.settings.seed;
    settings_.asynchronous = true;
    status_.phase = AutotunePhase::kWarmup;
    status_.best = ctx.knobs.values;
    status_.tuned_knobs = space_.tuned_knobs();
    current_ = ctx.knobs.values;
    if (space_.empty()) {
      status_.phase = AutotunePhase::kFrozen;
      announce_pinned_ = true;
    } else if (ctx.config_source == nullptr) {
      StartPolicy({});
    }
  }

  EventMask interests() const override { return EventBit(EventKind::kTensor); }

  void MarkStep(double now) override {
    std::lock_guard<std::mutex> lock(marks_mu_);
    marks_.push_back(now);
  }

  void OnTensor(const TensorEvent& e) override {
    if (e.status != StatusCode::kOk) return;
    done_.push_back({std::string(e.name), static_cast<double>(e.bytes), e.dtype,
                     e.finished});
  }

  Output Poll(double now) override {
    (void)now;
    Output out;
    if (announce_pinned_) {
      announce_pinned_ = false;
      PhaseChangeEvent pinned;
      pinned.from = AutotunePhase::kWarmup;
      pinned.to = AutotunePhase::kFrozen;
      pinned.values = current_;
      pinned.time = now;
      out.phase_changes.push_back(pinned);
    }
    if (failed_ || space_.empty()) return out;
    FeedMeter();
    try {
      for (const ThroughputMeter::Step& step : meter_.TakeSteps()) {
        if (!policy_) {
          if (space_.empty()) break;
          StartPolicy(LookUpWarmStart(out));
          continue;  // the step that identified the model is not scored
        }
        policy_->OnStep(step.bytes, step.seconds, step.end_time);
      }
      if (policy_) Drain(out);
    } catch (const std::exception& e) {
      Fail(e.what(), out);
    }
    return out;
  }

  AutotuneStatus status() const override {
    std::lock_guard<std::mutex> lock(status_mu_);
    return status_;
  }

 private:
  struct Done {
    std::string name;
    double bytes;
    DataType dtype;
    double time;
  };

  // Completions and the application's step marks, in time order.
  void FeedMeter() {
    std::vector<double> marks;
    {
      std::lock_guard<std::mutex> lock(marks_mu_);
      marks.swap(marks_);
    }
    std::size_t m = 0;
    for (const Done& d : done_) {
      for (; m < marks.size() && marks[m] <= d.time; ++m) Mark(marks[m]);
      if (collecting_ && !step_names_.insert(d.name).second) {
        collecting_ = false;  // a step boundary: the model is complete
      }
      if (collecting_) {
        step_.push_back({d.dtype, static_cast<std::int64_t>(d.bytes)});
      }
      meter_.OnTensorDone(d.name, d.bytes, d.time);
    }
    // Marks after this poll's last completion end the first step as well:
    // what completes next, seen by a later poll, completes after them. The
    // model must not depend on whether the cycle that saw the mark also
    // completed the next tensor.
    for (; m < marks.size(); ++m) Mark(marks[m]);
    done_.clear();
  }

  void Mark(double time) {
    meter_.MarkStep(time);
    // A mark before any tensor ends no step of the model.
    if (!step_.empty()) collecting_ = false;
  }

  // The first step's tensors (up to the first repeated name or step mark)
  // describe the model.
  tuner::PolicyStart LookUpWarmStart(Output& out) {
    tuner::PolicyStart start;
    ConfigSource::WarmStart warm;
    try {
      warm = ctx_.config_source->Lookup(ctx_.info, step_);
    } catch (const std::exception& e) {
      std::cerr << "[hvdtune rank 0] WARNING: the configuration source "
                   "failed ("
                << e.what() << "); tuning from scratch" << std::endl;
      return start;
    }
    if (warm.lookup) {
      out.store_lookups.push_back(
          {*warm.lookup, warm.fingerprint, RuntimeClock()});
    }
    for (const auto& p : warm.priors) {
      start.priors.push_back({space_.ToConfig(p.values), p.score});
    }
    if (warm.best) {
      start.known_best = space_.ToConfig(warm.best->values);
      start.known_best_score = warm.best->score;
      start.freeze_on_known_best = warm.freeze;
    }
    for (const auto& c : warm.conditions) {
      start.conditions.push_back({space_.ToConfig(c.values), c.scores});
    }
    std::lock_guard<std::mutex> lock(status_mu_);
    status_.source = warm.source;
    status_.fingerprint = warm.fingerprint;
    return start;
  }

  void StartPolicy(tuner::PolicyStart start) {
    start.initial = space_.ToConfig(ctx_.knobs.values);
    policy_ = std::make_unique<tuner::AutotunePolicy>(
        space_.space(), std::move(start), settings_);
  }

  void Drain(Output& out) {
    // The status before the config: the policy's worker may publish a
    // freeze at any moment, and a status that says frozen must come with
    // (or after) the frozen configuration, never before it.
    const tuner::PolicyStatus before = policy_->status();
    if (auto c = policy_->TakeConfig()) {
      current_ = space_.FromConfig(*c, current_);
      out.update = current_;
    }
    for (const tuner::PolicyEvent& e : policy_->TakeEvents()) {
      const tuner::PolicyStatus ps = policy_->status();
      switch (e.kind) {
        case tuner::PolicyEvent::Kind::kSample:
          out.samples.push_back({e.index, ToPhase(e.phase),
                                 space_.FromConfig(e.config, current_), e.score,
                                 ps.best_score, e.time, e.steps, e.seconds,
                                 e.precision});
          break;
        case tuner::PolicyEvent::Kind::kPhaseChange: {
          PhaseChangeEvent pc;
          pc.from = ToPhase(e.previous_phase);
          pc.to = ToPhase(e.phase);
          pc.samples = ps.exploration_samples;
          pc.values = e.config.empty() ? current_
                                       : space_.FromConfig(e.config, current_);
          pc.score = e.score;
          // Re-tuning: the frozen samples' median it moved from.
          pc.reference_score = pc.to == AutotunePhase::kRetuning
                                   ? e.reference
                                   : ps.initial_score;
          pc.exploration_seconds = ps.exploration_seconds;
          pc.exploration_loss_seconds = ps.exploration_loss_seconds;
          if (pc.to == AutotunePhase::kFrozen) {
            pc.estimate = ToEstimate(e.estimate);
            pc.reference = ToEstimate(e.initial);
            pc.gain = ToEstimate(e.gain);
            pc.kept_initial = e.kept_initial;
            // The initial configuration as the model estimates it, beside
            // the frozen one's estimate (not its warm-up sample).
            if (std::isfinite(e.initial.mean) && e.initial.mean > 0) {
              pc.reference_score = e.initial.mean;
            }
          }
          pc.confirmed_store = e.confirmation;
          pc.confirm_moved = e.confirm_moved;
          pc.confirm_tolerance = e.confirm_tolerance;
          pc.time = e.time;
          out.phase_changes.push_back(pc);
          if (pc.to == AutotunePhase::kFrozen && e.condition > 0) {
            AnnounceConfirmed(e, pc.values);
          } else if (e.confirmation) {
            AnnounceNotConfirmed(e);
          }
          break;
        }
        case tuner::PolicyEvent::Kind::kError:
          Fail(e.message, out);
          return;
      }
    }
    std::lock_guard<std::mutex> lock(status_mu_);
    status_.phase = ToPhase(before.phase);
    status_.samples = before.exploration_samples;
    status_.default_score = before.initial_score;
    status_.best_score = before.best_score;
    status_.exploration_seconds = before.exploration_seconds;
    status_.exploration_loss_seconds = before.exploration_loss_seconds;
    status_.exploration_mean_score = before.exploration_mean_score;
    status_.frozen_seconds = before.frozen_seconds;
    status_.frozen_gain_seconds = before.frozen_gain_seconds;
    status_.payback_seconds = before.payback_seconds;
    status_.best_estimate = ToEstimate(before.best_estimate);
    status_.default_estimate = ToEstimate(before.initial_estimate);
    status_.gain = ToEstimate(before.gain);
    status_.kept_initial = before.kept_initial;
    if (!before.best.empty()) {
      status_.best = space_.FromConfig(before.best, current_);
    }
  }

  // Which stored condition the confirmation found this job in.
  static void AnnounceConfirmed(const tuner::PolicyEvent& e,
                                const KnobSettings& values) {
    std::ostringstream os;
    os << "[hvdtune rank 0] autotune: confirmed the stored best of condition "
       << e.condition << " of " << e.conditions << " (" << values.ToString()
       << " at " << std::fixed << std::setprecision(3) << e.score / 1e9
       << " GB/s, " << Percent(e.confirm_moved)
       << " from the stored score, within the " << std::setprecision(1)
       << e.confirm_tolerance * 100 << "% that noise explains)";
    if (e.condition > 1) {
      os << "; the newest stored condition" << (e.condition > 2 ? "s" : "")
         << " did not confirm";
    }
    std::cerr << os.str() + "\n" << std::flush;
  }

  // A stored best that did not confirm: by how much it missed.
  static void AnnounceNotConfirmed(const tuner::PolicyEvent& e) {
    std::ostringstream os;
    os << "[hvdtune rank 0] autotune: the stored best measured "
       << Percent(e.confirm_moved) << " from its stored score, beyond the +/-"
       << std::fixed << std::setprecision(1) << e.confirm_tolerance * 100
       << "% that noise explains; exploring again";
    std::cerr << os.str() + "\n" << std::flush;
  }

  static std::string Percent(double fraction) {
    std::ostringstream os;
    os << std::showpos << std::fixed << std::setprecision(1) << fraction * 100
       << "%";
    return os.str();
  }

  void Fail(const std::string& why, Output& out) {
    failed_ = true;
    out.update.reset();
    out.errors.push_back({ErrorEvent::Kind::kAutotune, "",
                          "autotuning stopped after an error in the tuner: " +
                              why + "; continuing with " + current_.ToString(),
                          RuntimeClock()});
    std::lock_guard<std::mutex> lock(status_mu_);
    status_.phase = AutotunePhase::kOff;
  }

  TuningContext ctx_;
  KnobSpace space_;
  tuner::AutotunePolicySettings settings_;
  std::unique_ptr<tuner::AutotunePolicy> policy_;
  ThroughputMeter meter_;
  std::vector<Done> done_;
  std::vector<StepTensor> step_;
  std::unordered_set<std::string> step_names_;
  bool collecting_ = true;
  bool announce_pinned_ = false;
  bool failed_ = false;
  KnobSettings current_;

  std::mutex marks_mu_;
  std::vector<double> marks_;
  mutable std::mutex status_mu_;
  AutotuneStatus status_;
};

}  // namespace
}  // namespace hvdtune::internal

namespace hvdtune {

std::unique_ptr<Autotuner> MakeGpAutotuner(const TuningContext& context) {
  return std::make_unique<internal::GpAutotuner>(context);
}

}  // namespace hvdtune
