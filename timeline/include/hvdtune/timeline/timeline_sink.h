// Horovod's timeline (HOROVOD_TIMELINE=FILE): a Chrome-trace JSON file with
// one row per tensor (negotiation, queueing, fusion copy-in, the collective,
// copy-out) and instant events for knob changes, autotune samples and phase
// changes, errors, stalls and (HOROVOD_TIMELINE_MARK_CYCLES) cycle starts.
//
// The cycle thread only copies each event into a preallocated slot of a
// bounded buffer (dropping and counting when it is full); a writer thread
// formats and appends to the file, so memory stays bounded and the file
// grows while the job runs. The file is a JSON array closed at OnStop; a
// killed job's file lacks the closing bracket, which trace viewers accept
// and timeline/repair_timeline.py adds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hvdtune/events.h"

namespace hvdtune::timeline {

struct TimelineOptions {
  std::string path;
  bool mark_cycles = false;
  /// Events buffered between two writes (per buffer; there are two).
  std::size_t buffer_events = 8192;
  /// Ranks other than 0 write nothing (as Horovod's coordinator-only
  /// timeline) unless this is set.
  bool all_ranks = false;
};

class TimelineSink : public EventSink {
 public:
  explicit TimelineSink(TimelineOptions options);
  ~TimelineSink() override;

  void OnStart(const RuntimeInfo& info) override;
  void OnCycle(const CycleEvent& e) override;
  void OnTensor(const TensorEvent& e) override;
  void OnKnobsApplied(const KnobsAppliedEvent& e) override;
  void OnAutotuneSample(const AutotuneSampleEvent& e) override;
  void OnPhaseChange(const PhaseChangeEvent& e) override;
  void OnError(const ErrorEvent& e) override;
  void OnStall(const StallEvent& e) override;
  void OnStoreLookup(const StoreLookupEvent& e) override;
  void OnStop() override;

  /// Events dropped because the writer fell behind.
  std::uint64_t dropped() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hvdtune::timeline
