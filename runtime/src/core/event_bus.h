// Fans the event stream out to the attached sinks, on the cycle thread.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "hvdtune/events.h"

namespace hvdtune::internal {

class EventBus {
 public:
  void Attach(std::shared_ptr<EventSink> sink);
  bool empty() const { return sinks_.empty(); }
  /// Some sink wants events of this kind (build them only then).
  bool wants(EventKind kind) const {
    return !by_kind_[static_cast<unsigned>(kind)].empty();
  }

  /// Calls `method` with `event` on every sink that wants `kind`. A sink
  /// that throws is detached with one warning on stderr; the others still
  /// get the event.
  template <class Event>
  void Emit(EventKind kind, void (EventSink::*method)(const Event&),
            const Event& event) {
    auto& sinks = by_kind_[static_cast<unsigned>(kind)];
    for (std::size_t i = 0; i < sinks.size(); ++i) {
      EventSink* sink = sinks[i];
      try {
        (sink->*method)(event);
      } catch (const std::exception& e) {
        Detach(sink, e.what());
        --i;
      } catch (...) {
        Detach(sink, "unknown exception");
        --i;
      }
    }
  }
  /// Removes `sink` (no warning; nothing is called on it).
  void Remove(const EventSink* sink);
  void Start(const RuntimeInfo& info);
  void Stop();

 private:
  void Detach(EventSink* sink, const char* why);

  std::vector<std::shared_ptr<EventSink>> sinks_;
  std::array<std::vector<EventSink*>, static_cast<unsigned>(EventKind::kCount)>
      by_kind_;
  int rank_ = 0;
};

}  // namespace hvdtune::internal
