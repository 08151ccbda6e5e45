// The environment-driven wiring: what any application gets from the
// HOROVOD_* variables. Tools, benchmarks and bindings use it too.
#include <memory>

#include "hvdtune/runtime.h"
#include "hvdtune/services.h"
#include "sinks/autotune_log.h"
#include "sinks/stderr_log.h"

namespace hvdtune {

Services DefaultServices(const RuntimeConfig& config) {
  Services s;
  s.sinks.push_back(std::make_shared<internal::StderrLogSink>());
  if (config.autotune.enabled) {
    s.make_autotuner = MakeGpAutotuner;
    if (!config.autotune.log_path.empty()) {
      s.sinks.push_back(std::make_shared<internal::AutotuneLogSink>(
          config.autotune.log_path));
    }
  }
  return s;
}

}  // namespace hvdtune
