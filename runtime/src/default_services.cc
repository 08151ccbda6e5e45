// The environment-driven wiring: what any application gets from the
// HOROVOD_* variables. Tools, benchmarks and bindings use it too.
#include <memory>

#include "hvdtune/runtime.h"
#include "hvdtune/services.h"
#include "sinks/autotune_log.h"
#include "sinks/config_store.h"
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
    if (config.autotune.store_mode != AutotuneStoreMode::kOff &&
        !config.autotune.db_path.empty()) {
      // The config store: warm starts (unless the application brings its
      // own ConfigSource) and a record of every sample.
      auto store = std::make_shared<internal::ConfigStoreService>(
          config.autotune.db_path, config.autotune.store_mode);
      s.sinks.push_back(store);
      s.make_autotuner = [store](const TuningContext& ctx) {
        TuningContext with_store = ctx;
        if (!with_store.config_source) with_store.config_source = store;
        return MakeGpAutotuner(with_store);
      };
    }
  }
  return s;
}

}  // namespace hvdtune
