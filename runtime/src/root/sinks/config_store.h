// The config store (store/) attached to the runtime: a ConfigSource that
// looks up warm starts by fingerprint, and an EventSink that records every
// autotune sample and phase change through the store's writer thread.
// Rank 0 only reads and writes; other ranks' copies stay idle. Every
// failure is one warning naming the file or server (never a password); the
// job goes on. A server that cannot be reached at start or goes away later
// is reconnected to by the writer thread, with the writes queued meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hvdtune/config.h"
#include "hvdtune/services.h"

namespace hvdtune::store {
class Store;
class Writer;
struct Fingerprint;
}  // namespace hvdtune::store

namespace hvdtune::internal {

class ConfigStoreService final : public EventSink, public ConfigSource {
 public:
  /// Counts the writer's writes by result ("written", "dropped",
  /// "failed"), e.g. into a metric.
  using CountWrites = std::function<void(const char* result, std::uint64_t n)>;

  ConfigStoreService(std::string path, AutotuneStoreMode mode,
                     CountWrites count = {});
  ~ConfigStoreService() override;

  WarmStart Lookup(const RuntimeInfo& info,
                   const std::vector<StepTensor>& step) override;

  void OnAutotuneSample(const AutotuneSampleEvent& e) override;
  void OnPhaseChange(const PhaseChangeEvent& e) override;
  void OnStop() override;

  /// "hhhh-mmmm" once Lookup ran; empty before.
  std::string fingerprint() const;

 private:
  struct Shared;
  void Warn(const std::string& what);
  /// Stores the frozen configuration with the median of its frozen samples'
  /// scores (the freeze's own score is the best of noisy samples, biased
  /// upwards, and a later run confirms against the stored score).
  void StoreFrozenBest();
  void StartWriter(std::unique_ptr<store::Store> db, bool outage_reported);
  // Queues the job's fingerprints and run (the first write).
  void Begin(const store::Fingerprint& hw, const store::Fingerprint& model,
             const std::string& source);

  std::string path_;
  // path_ as messages show it (no password).
  std::string display_;
  CountWrites count_;
  AutotuneStoreMode mode_;
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<store::Writer> writer_;
  mutable std::mutex mu_;
  std::string fingerprint_;
  // Cycle thread: the configuration frozen on and its frozen samples' scores.
  std::optional<KnobSettings> frozen_;
  std::vector<double> frozen_scores_;
};

}  // namespace hvdtune::internal
