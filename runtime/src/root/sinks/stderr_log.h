// What a user reads on stderr: the autotuner's phase changes (rank 0),
// stall warnings (rank 0), and failures of the tuner. One line each.
#pragma once

#include "hvdtune/events.h"

namespace hvdtune::internal {

class StderrLogSink final : public EventSink {
 public:
  EventMask interests() const override {
    return EventBit(EventKind::kPhaseChange) | EventBit(EventKind::kStall) |
           EventBit(EventKind::kError);
  }
  void OnStart(const RuntimeInfo& info) override { rank_ = info.rank; }
  void OnPhaseChange(const PhaseChangeEvent& e) override;
  void OnStall(const StallEvent& e) override;
  void OnError(const ErrorEvent& e) override;

 private:
  int rank_ = 0;
  double initial_score_ = 0;
};

}  // namespace hvdtune::internal
