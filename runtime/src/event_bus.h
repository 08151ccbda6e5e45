// Fans the event stream out to the attached sinks, on the cycle thread.
#pragma once

#include <memory>
#include <vector>

#include "hvdtune/events.h"

namespace hvdtune::internal {

class EventBus {
 public:
  void Attach(std::shared_ptr<EventSink> sink);
  bool empty() const { return sinks_.empty(); }

  /// Calls `method` with `event` on every sink. A sink that throws is
  /// detached with one warning on stderr; the others still get the event.
  template <class Event>
  void Emit(void (EventSink::*method)(const Event&), const Event& event) {
    for (std::size_t i = 0; i < sinks_.size(); ++i) {
      try {
        (sinks_[i].get()->*method)(event);
      } catch (const std::exception& e) {
        Detach(i--, e.what());
      } catch (...) {
        Detach(i--, "unknown exception");
      }
    }
  }
  void Start(const RuntimeInfo& info);
  void Stop();

 private:
  void Detach(std::size_t index, const char* why);

  std::vector<std::shared_ptr<EventSink>> sinks_;
  int rank_ = 0;
};

}  // namespace hvdtune::internal
