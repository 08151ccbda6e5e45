#include "autotune/parameter_manager.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "hvdtune/status.h"
#include "hvdtune/tuner/bayes_optimizer.h"
#include "hvdtune/tuner/search_space.h"

namespace hvdtune {

std::string_view AutotunePhaseName(AutotunePhase phase) {
  switch (phase) {
    case AutotunePhase::kOff:
      return "off";
    case AutotunePhase::kWarmup:
      return "warmup";
    case AutotunePhase::kExploring:
      return "exploring";
    case AutotunePhase::kFrozen:
      return "frozen";
    case AutotunePhase::kRetuning:
      return "retuning";
  }
  return "unknown";
}

}  // namespace hvdtune

namespace hvdtune::internal {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string Gbps(double bytes_per_second) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << bytes_per_second / 1e9 << " GB/s";
  return os.str();
}

// Capacity used when the tuner turns the response cache on.
double CacheOnCapacity(const KnobSettings& initial) {
  return initial.cache_capacity() > 0
             ? static_cast<double>(initial.cache_capacity())
             : GetKnobSpec(KnobId::kCacheCapacity).default_value;
}

}  // namespace

AutotuneSettings ParseAutotuneSettings(const EnvLookup& env) {
  AutotuneSettings s;
  if (auto v = env("HOROVOD_AUTOTUNE")) {
    s.enabled = ParseBoolSetting("HOROVOD_AUTOTUNE", *v);
  }
  if (auto v = env("HOROVOD_AUTOTUNE_LOG")) s.log_path = *v;
  if (auto v = env("HOROVOD_AUTOTUNE_WARMUP_SAMPLES")) {
    s.warmup_samples = static_cast<int>(
        ParseIntSetting("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", *v, 0, 1000));
  }
  if (auto v = env("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE")) {
    s.steps_per_sample = static_cast<int>(
        ParseIntSetting("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", *v, 1, 100000));
  }
  if (auto v = env("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES")) {
    s.max_samples = static_cast<int>(ParseIntSetting(
        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", *v, 1, 10000));
  }
  if (auto v = env("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE")) {
    s.gaussian_process_noise = ParseFloatSetting(
        "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", *v, 0.0, 100.0, true);
  }
  if (auto v = env("HVDTUNE_AUTOTUNE_RETUNE_DROP")) {
    s.retune_drop =
        ParseFloatSetting("HVDTUNE_AUTOTUNE_RETUNE_DROP", *v, 0.0, 1.0, false);
  }
  if (auto v = env("HVDTUNE_AUTOTUNE_RETUNE_WINDOWS")) {
    s.retune_windows = static_cast<int>(
        ParseIntSetting("HVDTUNE_AUTOTUNE_RETUNE_WINDOWS", *v, 1, 100000));
  }
  if (auto v = env("HVDTUNE_AUTOTUNE_SEED")) {
    s.seed = static_cast<std::uint64_t>(
        ParseIntSetting("HVDTUNE_AUTOTUNE_SEED", *v, 0, INT64_MAX));
  }
  return s;
}

ParameterManager::ParameterManager(const AutotuneSettings& settings,
                                   const TuningScope& scope,
                                   const KnobSettings& initial)
    : settings_(settings),
      scope_(scope),
      initial_(initial),
      current_(initial),
      best_(initial) {
  std::vector<tuner::Dimension> dims;
  for (const KnobSpec& spec : KnobTable()) {
    if (!spec.tunable || scope.pinned[static_cast<int>(spec.id)]) continue;
    switch (spec.id) {
      case KnobId::kCacheCapacity:
        dims.push_back(tuner::Dimension::Categorical("cache_enabled", 2));
        break;
      case KnobId::kHierarchicalAllgather:
        if (!scope.multi_node) continue;
        dims.push_back(
            tuner::Dimension::Categorical(std::string(spec.name), 2));
        break;
      case KnobId::kNumGroups:
        if (!scope.tune_num_groups) continue;
        dims.push_back(tuner::Dimension::Integer(
            std::string(spec.name), spec.tune_min, spec.tune_max, false));
        break;
      default:
        if (spec.type == KnobType::kCategorical) {
          if (spec.choices.size() < 2) continue;
          dims.push_back(tuner::Dimension::Categorical(
              std::string(spec.name), static_cast<int>(spec.choices.size())));
        } else {
          dims.push_back(tuner::Dimension::Continuous(
              std::string(spec.name), spec.tune_min, spec.tune_max,
              spec.scale == KnobScale::kLog));
        }
    }
    dims_.push_back(spec.id);
  }
  if (!dims.empty()) {
    space_ = std::make_unique<tuner::SearchSpace>(std::move(dims));
  }
  warmup_left_ = settings_.warmup_samples;
  if (!settings_.log_path.empty()) {
    log_.open(settings_.log_path, std::ios::out | std::ios::trunc);
    if (!log_) {
      std::cerr << "[hvdtune] WARNING: cannot write the autotune log "
                << settings_.log_path << "; tuning goes on without it"
                << std::endl;
    } else {
      // Horovod's columns first, then ours.
      log_ << "hierarchical_allreduce,hierarchical_allgather,cache_enabled,"
              "cycle_time_ms,tensor_fusion_threshold,score,sample,phase,"
              "timestamp,allreduce_algorithm,ring_segment_bytes,num_groups,"
              "fusion_threshold_bytes\n";
      log_.flush();
    }
  }
  if (!space_) {
    phase_ = AutotunePhase::kFrozen;
    std::cerr << "[hvdtune] autotune: every tunable knob is pinned; nothing "
                 "to tune"
              << std::endl;
  }
}

ParameterManager::~ParameterManager() = default;

std::vector<std::string> ParameterManager::tuned_knobs() const {
  std::vector<std::string> out;
  for (KnobId id : dims_) out.emplace_back(GetKnobSpec(id).name);
  return out;
}

AutotuneStatus ParameterManager::status() const {
  AutotuneStatus s;
  s.phase = phase_;
  s.samples = samples_;
  s.default_score = default_score_;
  s.best_score = best_score_;
  s.best = best_;
  s.tuned_knobs = tuned_knobs();
  return s;
}

std::vector<double> ParameterManager::ToConfig(const KnobSettings& k) const {
  std::vector<double> c;
  for (KnobId id : dims_) {
    if (id == KnobId::kCacheCapacity) {
      c.push_back(k.cache_capacity() > 0 ? 1.0 : 0.0);
    } else {
      const KnobSpec& spec = GetKnobSpec(id);
      double v = k.Get(id);
      if (spec.type != KnobType::kCategorical && spec.type != KnobType::kBool) {
        v = std::clamp(v, spec.tune_min, spec.tune_max);
      }
      c.push_back(v);
    }
  }
  return c;
}

KnobSettings ParameterManager::FromConfig(const std::vector<double>& c) const {
  KnobSettings k = current_;
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    const KnobId id = dims_[i];
    const KnobSpec& spec = GetKnobSpec(id);
    double v = c[i];
    if (id == KnobId::kCacheCapacity) {
      v = v >= 0.5 ? CacheOnCapacity(initial_) : 0.0;
    } else if (spec.type != KnobType::kFloat) {
      v = std::round(v);
    }
    k.Set(id, std::clamp(v, spec.min_value, spec.max_value));
  }
  return k;
}

std::optional<KnobSettings> ParameterManager::OnStep(double bytes,
                                                     double seconds,
                                                     double now) {
  if (start_time_ < 0) start_time_ = now;
  if (skip_next_step_) {
    // This step straddled a knob change: it measures neither setting.
    skip_next_step_ = false;
    return std::nullopt;
  }
  if (seconds <= 0 || bytes <= 0) return std::nullopt;
  step_scores_.push_back(bytes / seconds);
  if (static_cast<int>(step_scores_.size()) < settings_.steps_per_sample) {
    return std::nullopt;
  }
  const double score = Median(step_scores_);
  step_scores_.clear();
  return FinishSample(score, now);
}

std::optional<KnobSettings> ParameterManager::FinishSample(double score,
                                                           double now) {
  switch (phase_) {
    case AutotunePhase::kOff:
      return std::nullopt;
    case AutotunePhase::kWarmup:
      default_score_ = score;
      Log(score, now);
      if (--warmup_left_ <= 0) return StartExploring(now);
      return std::nullopt;
    case AutotunePhase::kExploring:
    case AutotunePhase::kRetuning: {
      optimizer_->Observe(ToConfig(current_), score);
      ++samples_;
      ++round_samples_;
      Log(score, now);
      const int budget = phase_ == AutotunePhase::kRetuning
                             ? std::max(4, settings_.max_samples / 2)
                             : settings_.max_samples;
      if (round_samples_ >= budget || optimizer_->ShouldStop()) {
        return Freeze(now);
      }
      current_ = FromConfig(optimizer_->Suggest());
      skip_next_step_ = true;
      return current_;
    }
    case AutotunePhase::kFrozen: {
      Log(score, now);
      ++frozen_windows_;
      if (frozen_windows_ == 1) {
        frozen_reference_ = score;
        return std::nullopt;
      }
      if (settings_.retune_drop <= 0 || !space_) return std::nullopt;
      if (score < (1.0 - settings_.retune_drop) * frozen_reference_) {
        ++degraded_windows_;
      } else {
        degraded_windows_ = 0;
        // Track slow improvements too, so the reference stays current.
        frozen_reference_ = std::max(frozen_reference_, score);
      }
      if (degraded_windows_ < settings_.retune_windows) return std::nullopt;
      std::cerr << "[hvdtune] autotune: score fell to " << Gbps(score)
                << " from " << Gbps(frozen_reference_) << " for "
                << degraded_windows_
                << " samples; re-tuning around the incumbent" << std::endl;
      phase_ = AutotunePhase::kRetuning;
      degraded_windows_ = 0;
      tuner::BayesOptSettings bo;
      bo.seed = settings_.seed + static_cast<std::uint64_t>(samples_);
      bo.gp.noise_floor = std::pow(settings_.gaussian_process_noise / 10, 2);
      optimizer_ = std::make_unique<tuner::BayesianOptimizer>(*space_, bo);
      // The incumbent under today's conditions is the first point.
      optimizer_->Observe(ToConfig(current_), score);
      round_samples_ = 1;
      current_ = FromConfig(optimizer_->Suggest());
      skip_next_step_ = true;
      return current_;
    }
  }
  return std::nullopt;
}

std::optional<KnobSettings> ParameterManager::StartExploring(double now) {
  (void)now;
  phase_ = AutotunePhase::kExploring;
  tuner::BayesOptSettings bo;
  bo.seed = settings_.seed;
  bo.gp.noise_floor = std::pow(settings_.gaussian_process_noise / 10, 2);
  optimizer_ = std::make_unique<tuner::BayesianOptimizer>(*space_, bo);
  // The configuration measured during warm-up is the first sample: the
  // tuner never freezes on something worse than what it started from.
  optimizer_->Observe(ToConfig(current_), default_score_);
  samples_ = round_samples_ = 1;
  best_score_ = default_score_;
  current_ = FromConfig(optimizer_->Suggest());
  skip_next_step_ = true;
  return current_;
}

std::optional<KnobSettings> ParameterManager::Freeze(double now) {
  (void)now;
  const auto best = optimizer_->Best();
  phase_ = AutotunePhase::kFrozen;
  frozen_windows_ = 0;
  degraded_windows_ = 0;
  if (best) {
    best_ = FromConfig(best->config);
    best_score_ = best->score;
  }
  const double gain =
      default_score_ > 0 ? (best_score_ / default_score_ - 1) * 100 : 0;
  std::cerr << "[hvdtune] autotune: frozen after " << samples_
            << " samples: " << best_.ToString() << " at " << Gbps(best_score_)
            << " (initial " << Gbps(default_score_) << ", " << std::showpos
            << std::fixed << std::setprecision(1) << gain << std::noshowpos
            << "%)" << std::endl;
  current_ = best_;
  skip_next_step_ = true;
  return current_;
}

void ParameterManager::Log(double score, double now) {
  if (!log_) return;
  const KnobSettings& k = current_;
  log_ << (k.allreduce_algorithm_name() == "hierarchical" ? 1 : 0) << ','
       << (k.hierarchical_allgather() ? 1 : 0) << ','
       << (k.cache_capacity() > 0 ? 1 : 0) << ',' << k.cycle_time_ms() << ','
       << static_cast<double>(k.fusion_threshold_bytes()) / (1024.0 * 1024.0)
       << ',' << score << ',' << samples_ << ',' << AutotunePhaseName(phase_)
       << ',' << std::fixed << std::setprecision(6) << now - start_time_
       << std::defaultfloat << ',' << k.allreduce_algorithm_name() << ','
       << k.ring_segment_bytes() << ',' << k.num_groups() << ','
       << k.fusion_threshold_bytes() << '\n';
  log_.flush();
}

}  // namespace hvdtune::internal
