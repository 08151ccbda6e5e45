// HOROVOD_AUTOTUNE_LOG: one CSV row per autotune sample (rank 0). Columns
// come from the knob table: Horovod's columns (the knobs that declare one),
// score, sample, phase, timestamp, then every knob by its table name, then
// what the sample cost: sample_steps, sample_seconds, sample_precision.
#pragma once

#include <fstream>
#include <string>

#include "hvdtune/events.h"

namespace hvdtune::internal {

class AutotuneLogSink final : public EventSink {
 public:
  explicit AutotuneLogSink(std::string path);
  /// The header line (without newline).
  static std::string Header();

  EventMask interests() const override {
    return EventBit(EventKind::kAutotuneSample);
  }
  void OnStart(const RuntimeInfo& info) override;
  void OnAutotuneSample(const AutotuneSampleEvent& e) override;

 private:
  std::string path_;
  std::ofstream out_;
  double start_ = -1;
};

}  // namespace hvdtune::internal
