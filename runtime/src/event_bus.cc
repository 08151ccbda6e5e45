#include "event_bus.h"

#include <cxxabi.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <typeinfo>

namespace hvdtune::internal {

void EventBus::Attach(std::shared_ptr<EventSink> sink) {
  if (sink) sinks_.push_back(std::move(sink));
}

void EventBus::Start(const RuntimeInfo& info) {
  rank_ = info.rank;
  for (std::size_t i = 0; i < sinks_.size(); ++i) {
    try {
      sinks_[i]->OnStart(info);
    } catch (const std::exception& e) {
      Detach(i--, e.what());
    }
  }
}

void EventBus::Stop() {
  for (std::size_t i = 0; i < sinks_.size(); ++i) {
    try {
      sinks_[i]->OnStop();
    } catch (const std::exception& e) {
      Detach(i--, e.what());
    }
  }
}

void EventBus::Detach(std::size_t index, const char* why) {
  const EventSink& sink = *sinks_[index];
  const char* mangled = typeid(sink).name();
  int rc = 0;
  char* name = abi::__cxa_demangle(mangled, nullptr, nullptr, &rc);
  std::ostringstream os;
  os << "[hvdtune rank " << rank_ << "] WARNING: event sink "
     << (rc == 0 && name ? name : mangled)
     << " failed and was detached: " << why << "; the job goes on without it\n";
  std::free(name);
  std::cerr << os.str() << std::flush;
  sinks_.erase(sinks_.begin() + static_cast<std::ptrdiff_t>(index));
}

}  // namespace hvdtune::internal
