// The composition root (hvdtune::runtime): what any application gets from
// the HOROVOD_* variables. The core (hvdtune::core) knows the tuner, the
// store, metrics and the timeline only through the Services interfaces;
// this file attaches them as the environment asks, and gives
// Runtime(RuntimeOptions), the env-driven constructor, its body. Tools,
// benchmarks and bindings use it too.
#include <memory>
#include <string>
#include <utility>

#include "core/runtime_impl.h"
#include "hvdtune/metrics/metrics_sink.h"
#include "hvdtune/runtime.h"
#include "hvdtune/services.h"
#include "hvdtune/timeline/timeline_sink.h"
#include "root/sinks/autotune_log.h"
#include "root/sinks/config_store.h"
#include "root/sinks/stderr_log.h"

namespace hvdtune {

Services DefaultServices(const RuntimeConfig& config) {
  Services s;
  s.sinks.push_back(std::make_shared<internal::StderrLogSink>());
  // Metrics are kept on every rank (cheap counters); the endpoint serves
  // them only when HOROVOD_METRICS_PORT is set.
  const TelemetrySettings& t = config.telemetry;
  std::shared_ptr<metrics::MetricsSink> metrics;
  if (t.metrics_port >= 0) {
    metrics = std::make_shared<metrics::MetricsSink>(
        metrics::MetricsOptions{t.metrics_port, t.metrics_address});
    s.sinks.push_back(metrics);
    s.report_backend_wait = [metrics](double waited, int unreachable) {
      metrics->SetBackendWait(waited, unreachable);
    };
  }
  // HOROVOD_TIMELINE's file and Runtime::StartTimeline's.
  s.make_timeline = [](const std::string& path, bool mark_cycles) {
    timeline::TimelineOptions options;
    options.path = path;
    options.mark_cycles = mark_cycles;
    return std::make_shared<timeline::TimelineSink>(options);
  };
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
      internal::ConfigStoreService::CountWrites count;
      if (metrics) {
        count = [metrics](const char* result, std::uint64_t n) {
          metrics->CountStoreWrites(result, n);
        };
      }
      auto store = std::make_shared<internal::ConfigStoreService>(
          config.autotune.db_path, config.autotune.store_mode, count);
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

namespace {

// The environment path: a configuration error is not thrown here but voted
// on at init, so every rank fails together instead of some hanging.
std::unique_ptr<internal::RuntimeImpl> FromEnvironment(RuntimeOptions options) {
  const EnvLookup env = options.env ? options.env : ProcessEnv();
  RuntimeConfig config;
  std::string error;
  try {
    config = ParseConfig(env);
  } catch (const ConfigError& e) {
    error = e.what();
  }
  config.tune_num_groups = options.tune_num_groups;
  config.ranks = std::move(options.ranks);
  Services services = DefaultServices(config);
  for (auto& sink : options.sinks) services.sinks.push_back(std::move(sink));
  services.config_source = std::move(options.config_source);
  return std::make_unique<internal::RuntimeImpl>(
      std::move(config), std::move(services), std::move(error));
}

}  // namespace

// Defined here rather than with the rest of Runtime (runtime.cc, the core):
// a program that links only hvdtune::core builds its Runtime from a
// RuntimeConfig and Services of its own.
Runtime::Runtime(RuntimeOptions options)
    : impl_(FromEnvironment(std::move(options))) {}

}  // namespace hvdtune
