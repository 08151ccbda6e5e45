#include "hvdtune/events.h"

#include <chrono>

namespace hvdtune {

double RuntimeClock() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

std::string_view ErrorKindName(ErrorEvent::Kind kind) {
  switch (kind) {
    case ErrorEvent::Kind::kMismatch:
      return "mismatch";
    case ErrorEvent::Kind::kBackend:
      return "backend";
    case ErrorEvent::Kind::kNegotiation:
      return "negotiation";
    case ErrorEvent::Kind::kAutotune:
      return "autotune";
    case ErrorEvent::Kind::kSink:
      return "sink";
    case ErrorEvent::Kind::kStallShutdown:
      return "stall_shutdown";
  }
  return "unknown";
}

std::string_view StoreLookupResultName(StoreLookupEvent::Result r) {
  switch (r) {
    case StoreLookupEvent::Result::kHit:
      return "hit";
    case StoreLookupEvent::Result::kNear:
      return "near";
    case StoreLookupEvent::Result::kMiss:
      return "miss";
    case StoreLookupEvent::Result::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace hvdtune
