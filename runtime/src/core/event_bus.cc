#include "core/event_bus.h"

#include <cxxabi.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <typeinfo>

namespace hvdtune::internal {

void EventBus::Attach(std::shared_ptr<EventSink> sink) {
  if (!sink) return;
  const EventMask mask = sink->interests();
  for (unsigned k = 0; k < by_kind_.size(); ++k) {
    if (mask & (1u << k)) by_kind_[k].push_back(sink.get());
  }
  sinks_.push_back(std::move(sink));
}

void EventBus::Remove(const EventSink* sink) {
  for (auto& list : by_kind_) std::erase(list, sink);
  std::erase_if(sinks_, [&](const auto& s) { return s.get() == sink; });
}

void EventBus::Start(const RuntimeInfo& info) {
  rank_ = info.rank;
  for (std::size_t i = 0; i < sinks_.size(); ++i) {
    try {
      sinks_[i]->OnStart(info);
    } catch (const std::exception& e) {
      Detach(sinks_[i--].get(), e.what());
    }
  }
}

void EventBus::Stop() {
  for (std::size_t i = 0; i < sinks_.size(); ++i) {
    try {
      sinks_[i]->OnStop();
    } catch (const std::exception& e) {
      Detach(sinks_[i--].get(), e.what());
    }
  }
}

void EventBus::Detach(EventSink* detached, const char* why) {
  const EventSink& sink = *detached;
  const char* mangled = typeid(sink).name();
  int rc = 0;
  char* name = abi::__cxa_demangle(mangled, nullptr, nullptr, &rc);
  std::ostringstream os;
  os << "[hvdtune rank " << rank_ << "] WARNING: event sink "
     << (rc == 0 && name ? name : mangled)
     << " failed and was detached: " << why << "; the job goes on without it\n";
  std::free(name);
  std::cerr << os.str() << std::flush;
  for (auto& list : by_kind_) std::erase(list, detached);
  std::erase_if(sinks_, [&](const auto& s) { return s.get() == detached; });
}

}  // namespace hvdtune::internal
