#include "root/sinks/config_store.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include "hvdtune/store/store.h"
#include "hvdtune/store/writer.h"
#include "hvdtune/store_mapping.h"
#include "root/sinks/stored_conditions.h"

namespace hvdtune::internal {
namespace {

constexpr int kPriorSamplesExact = 200;
constexpr int kPriorSamplesNear = 100;
constexpr int kNearestPairs = 3;
constexpr double kNearEnough = 0.5;
constexpr std::size_t kQueueCapacity = 4096;

double WallClock() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct ConfigStoreService::Shared {
  std::int64_t hardware = 0, model = 0, run = 0;
};

ConfigStoreService::ConfigStoreService(std::string path, AutotuneStoreMode mode,
                                       CountWrites count)
    : path_(std::move(path)),
      display_(store::DisplayLocation(path_)),
      count_(std::move(count)),
      mode_(mode),
      shared_(std::make_shared<Shared>()) {}

ConfigStoreService::~ConfigStoreService() = default;

void ConfigStoreService::Warn(const std::string& what) {
  std::cerr << "[hvdtune rank 0] WARNING: " << what << std::endl;
}

std::string ConfigStoreService::fingerprint() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fingerprint_;
}

ConfigSource::WarmStart ConfigStoreService::Lookup(
    const RuntimeInfo& info, const std::vector<StepTensor>& step) {
  WarmStart warm;
  const store::Fingerprint hw =
      JobHardwareFingerprint(info.size, info.local_size, info.cross_size);
  const store::Fingerprint model = StepModelFingerprint(step);
  const std::string printable = store::PrintableFingerprint(hw, model);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fingerprint_ = printable;
  }
  warm.fingerprint = printable;
  warm.lookup = StoreLookupEvent::Result::kMiss;

  std::unique_ptr<store::Store> db;
  try {
    db = std::make_unique<store::Store>(store::StoreOptions{path_});
  } catch (const std::exception& e) {
    warm.lookup = StoreLookupEvent::Result::kError;
    // A server may come back: its writes wait in the writer's queue.
    const bool retry = dynamic_cast<const store::StoreUnavailable*>(&e);
    Warn(std::string(e.what()) + "; autotuning goes on without the store" +
         (retry ? " (its writes are queued and retried)" : ""));
    if (mode_ == AutotuneStoreMode::kApply) {
      warm.best = Sample{info.knobs, 0};
      warm.freeze = true;
    }
    if (retry) StartWriter(nullptr, /*outage_reported=*/true);
    Begin(hw, model, "fresh");
    return warm;
  }
  if (!db->network_fs().empty()) {
    Warn("config store " + display_ + " is on a network file system (" +
         db->network_fs() +
         "): using the rollback journal instead of WAL; only one host "
         "should write to it at a time");
  }
  std::string how;
  try {
    // One round trip to a server: the ids, the best and the priors.
    const store::PairLookup found =
        db->Lookup(hw.Hash(), model.Hash(), kPriorSamplesExact);
    const std::optional<store::Best>& best = found.best;
    std::optional<KnobSettings> best_knobs;
    if (best) best_knobs = FromStored(best->values, info.knobs);
    if (best_knobs) {
      warm.best = Sample{*best_knobs, best->score};
      warm.source = "store";
      warm.lookup = StoreLookupEvent::Result::kHit;
      how = "best of run " + std::to_string(best->run) + " (" +
            best_knobs->ToString() + ")";
      if (mode_ == AutotuneStoreMode::kApply) {
        warm.freeze = true;
        how += ", applied without tuning";
      }
      for (const auto& s : found.samples) {
        if (auto k = FromStored(s.values, info.knobs)) {
          warm.priors.push_back({*k, s.score});
        }
      }
      for (const StoredCondition& c :
           SplitStoredConditions(found.samples, &*best)) {
        if (auto k = FromStored(c.values, info.knobs)) {
          warm.conditions.push_back({*k, c.scores});
        }
      }
      if (warm.conditions.size() >= 2 && mode_ != AutotuneStoreMode::kApply) {
        how += ", " + std::to_string(warm.conditions.size()) +
               " stored conditions to tell apart";
      }
    } else if (mode_ == AutotuneStoreMode::kApply) {
      warm.best = Sample{info.knobs, 0};
      warm.freeze = true;
      Warn("config store " + display_ + " has no configuration for " +
           printable + "; HVDTUNE_AUTOTUNE_STORE=apply runs the initial " +
           "knobs untuned");
    } else {
      // Transfer: the nearest pairs' samples as prior observations.
      std::vector<std::pair<double, store::KnownPair>> near;
      for (store::KnownPair& p : db->KnownPairs()) {
        const double sim = store::HardwareSimilarity(hw, p.hardware_fp) *
                           store::ModelSimilarity(model, p.model_fp);
        if (sim >= kNearEnough) near.emplace_back(sim, std::move(p));
      }
      std::stable_sort(
          near.begin(), near.end(),
          [](const auto& a, const auto& b) { return a.first > b.first; });
      if (near.size() > kNearestPairs) near.resize(kNearestPairs);
      for (const auto& [sim, p] : near) {
        for (const auto& s :
             db->PairSamples(p.hardware, p.model, kPriorSamplesNear)) {
          if (auto k = FromStored(s.values, info.knobs)) {
            warm.priors.push_back({*k, s.score});
          }
        }
      }
      if (!warm.priors.empty()) {
        warm.source = "transfer";
        warm.lookup = StoreLookupEvent::Result::kNear;
        how = std::to_string(warm.priors.size()) + " samples of " +
              std::to_string(near.size()) + " similar job(s) as priors";
      }
    }
  } catch (const std::exception& e) {
    Warn(std::string(e.what()) + "; tuning from scratch");
    warm = WarmStart{};
    warm.fingerprint = printable;
    warm.lookup = StoreLookupEvent::Result::kError;
  }
  std::cerr << "[hvdtune rank 0] config store " << display_ << ": fingerprint "
            << printable << ", "
            << (how.empty() ? std::string("nothing known, tuning fresh") : how)
            << std::endl;

  // From here on every write goes through the writer thread.
  StartWriter(std::move(db), false);
  Begin(hw, model, warm.source);
  return warm;
}

void ConfigStoreService::StartWriter(std::unique_ptr<store::Store> db,
                                     bool outage_reported) {
  store::Writer::Options options;
  const std::string path = path_;
  options.open = [path] {
    return std::make_unique<store::Store>(store::StoreOptions{path});
  };
  options.outage_reported = outage_reported;
  options.notice = [](const std::string& what) {
    std::cerr << "[hvdtune rank 0] " << what << std::endl;
  };
  options.count = count_;
  writer_ = std::make_unique<store::Writer>(
      std::move(db), kQueueCapacity, [this](const std::string& w) { Warn(w); },
      std::move(options));
}

void ConfigStoreService::Begin(const store::Fingerprint& hw,
                               const store::Fingerprint& model,
                               const std::string& source) {
  if (!writer_) return;
  auto shared = shared_;
  const double started = WallClock();
  writer_->Push([shared, hw, model, source, started](store::Store& s) {
    shared->hardware = s.PutFingerprint("hardware", hw);
    shared->model = s.PutFingerprint("model", model);
    shared->run = s.BeginRun(shared->hardware, shared->model, HVDTUNE_VERSION,
                             source, started);
  });
}

void ConfigStoreService::OnAutotuneSample(const AutotuneSampleEvent& e) {
  if (!writer_) return;
  store::Sample s;
  s.index = e.index;
  s.phase = std::string(AutotunePhaseName(e.phase));
  s.values = ToStored(e.values);
  s.score = e.score;
  s.time = WallClock();
  if (frozen_ && e.phase == AutotunePhase::kFrozen) {
    frozen_scores_.push_back(e.score);
  }
  auto shared = shared_;
  writer_->Push([shared, s = std::move(s)](store::Store& db) {
    if (shared->run != 0) db.AddSamples(shared->run, {s});
  });
}

void ConfigStoreService::OnPhaseChange(const PhaseChangeEvent& e) {
  // A configuration applied without tuning keeps the stored best as it is.
  if (!writer_ || mode_ == AutotuneStoreMode::kApply) return;
  if (e.from == AutotunePhase::kFrozen) StoreFrozenBest();
  if (e.to != AutotunePhase::kFrozen || e.score <= 0) return;
  // Stored at once (a job that dies keeps it), then again at the end with
  // the frozen samples' median.
  frozen_ = e.values;
  frozen_scores_.clear();
  store::Best best;
  best.values = ToStored(e.values);
  best.score = e.score;
  best.time = WallClock();
  auto shared = shared_;
  writer_->Push([shared, best](store::Store& db) mutable {
    if (shared->run == 0) return;
    best.run = shared->run;
    db.SetBest(shared->hardware, shared->model, best);
  });
}

void ConfigStoreService::StoreFrozenBest() {
  if (!frozen_ || frozen_scores_.empty()) return;
  std::vector<double> v = frozen_scores_;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  store::Best best;
  best.values = ToStored(*frozen_);
  best.score = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  best.time = WallClock();
  frozen_.reset();
  frozen_scores_.clear();
  auto shared = shared_;
  writer_->Push([shared, best](store::Store& db) mutable {
    if (shared->run == 0) return;
    best.run = shared->run;
    db.SetBest(shared->hardware, shared->model, best);
  });
}

void ConfigStoreService::OnStop() {
  if (!writer_) return;
  if (mode_ != AutotuneStoreMode::kApply) StoreFrozenBest();
  auto shared = shared_;
  writer_->Push([shared](store::Store& db) {
    if (shared->run != 0) db.EndRun(shared->run, "completed", WallClock());
  });
  writer_->Finish();
  if (writer_->dropped() > 0 || writer_->failed() > 0) {
    Warn("config store " + display_ + ": " +
         std::to_string(writer_->dropped()) +
         " writes dropped (queue full, server away or shutdown), " +
         std::to_string(writer_->failed()) + " failed");
  }
  writer_.reset();
}

}  // namespace hvdtune::internal
