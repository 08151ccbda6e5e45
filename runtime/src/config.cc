#include "hvdtune/config.h"

#include <arpa/inet.h>

#include <cstdint>

#include "hvdtune/status.h"

namespace hvdtune {
namespace {

template <class F>
void IfSet(const EnvLookup& env, std::string_view var, F&& apply) {
  if (auto v = env(var)) apply(var, *v);
}

int Int(std::string_view var, std::string_view text, std::int64_t lo,
        std::int64_t hi) {
  return static_cast<int>(ParseIntSetting(var, text, lo, hi));
}

}  // namespace

const char* AutotuneStoreModeName(AutotuneStoreMode mode) {
  switch (mode) {
    case AutotuneStoreMode::kAuto:
      return "auto";
    case AutotuneStoreMode::kApply:
      return "apply";
    case AutotuneStoreMode::kOff:
      return "off";
  }
  return "auto";
}

AutotuneSettings ParseAutotuneSettings(const EnvLookup& env) {
  AutotuneSettings s;
  IfSet(env, "HOROVOD_AUTOTUNE",
        [&](auto var, auto v) { s.enabled = ParseBoolSetting(var, v); });
  IfSet(env, "HOROVOD_AUTOTUNE_LOG",
        [&](auto, auto v) { s.log_path = std::string(v); });
  IfSet(env, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
        [&](auto var, auto v) { s.warmup_samples = Int(var, v, 0, 1000); });
  IfSet(env, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
        [&](auto var, auto v) { s.steps_per_sample = Int(var, v, 1, 100000); });
  IfSet(env, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
        [&](auto var, auto v) { s.max_samples = Int(var, v, 1, 10000); });
  IfSet(env, "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", [&](auto var, auto v) {
    s.gaussian_process_noise = ParseFloatSetting(var, v, 0.0, 100.0, true);
  });
  IfSet(env, "HVDTUNE_AUTOTUNE_RETUNE_DROP", [&](auto var, auto v) {
    s.retune_drop = ParseFloatSetting(var, v, 0.0, 1.0, false);
  });
  IfSet(env, "HVDTUNE_AUTOTUNE_RETUNE_WINDOWS",
        [&](auto var, auto v) { s.retune_windows = Int(var, v, 1, 100000); });
  IfSet(env, "HVDTUNE_AUTOTUNE_SEED", [&](auto var, auto v) {
    s.seed = static_cast<std::uint64_t>(ParseIntSetting(var, v, 0, INT64_MAX));
  });
  if (auto v = env("HOROVOD_AUTOTUNE_DB"); v && !v->empty()) {
    s.db_path = *v;
  } else if (auto xdg = env("XDG_STATE_HOME"); xdg && !xdg->empty()) {
    s.db_path = *xdg + "/hvdtune/store.db";
  } else if (auto home = env("HOME"); home && !home->empty()) {
    s.db_path = *home + "/.local/state/hvdtune/store.db";
  }
  IfSet(env, "HVDTUNE_AUTOTUNE_STORE", [&](auto var, auto v) {
    if (v == "auto") {
      s.store_mode = AutotuneStoreMode::kAuto;
    } else if (v == "apply") {
      s.store_mode = AutotuneStoreMode::kApply;
    } else if (v == "off") {
      s.store_mode = AutotuneStoreMode::kOff;
    } else {
      throw ConfigError(std::string(var) + "='" + std::string(v) +
                        "' is not allowed: use auto, apply or off");
    }
  });
  return s;
}

TelemetrySettings ParseTelemetrySettings(const EnvLookup& env) {
  TelemetrySettings s;
  IfSet(env, "HOROVOD_METRICS_PORT",
        [&](auto var, auto v) { s.metrics_port = Int(var, v, 0, 65535); });
  IfSet(env, "HVDTUNE_METRICS_ADDRESS", [&](auto var, auto v) {
    const std::string text(v);
    unsigned char addr[16];
    if (inet_pton(AF_INET, text.c_str(), addr) != 1 &&
        inet_pton(AF_INET6, text.c_str(), addr) != 1) {
      throw ConfigError(std::string(var) + "='" + text +
                        "': not an IPv4 or IPv6 address (e.g. 127.0.0.1, "
                        "0.0.0.0, ::1)");
    }
    s.metrics_address = text;
  });
  IfSet(env, "HOROVOD_TIMELINE", [&](auto var, auto v) {
    if (v.empty()) {
      throw ConfigError(std::string(var) +
                        "='': expected a file path (unset it for no "
                        "timeline)");
    }
    s.timeline_path = std::string(v);
  });
  IfSet(env, "HOROVOD_TIMELINE_MARK_CYCLES", [&](auto var, auto v) {
    s.timeline_mark_cycles = ParseBoolSetting(var, v);
  });
  return s;
}

RuntimeConfig ParseConfig(const EnvLookup& env) {
  RuntimeConfig c;
  c.knobs = ParseKnobsFromEnv(env);
  RuntimeSettings& s = c.settings;
  IfSet(env, "HVDTUNE_RANKS_PER_NODE",
        [&](auto var, auto v) { s.ranks_per_node = Int(var, v, 1, 1 << 20); });
  IfSet(env, "HVDTUNE_FUSION_LOOKAHEAD", [&](auto var, auto v) {
    s.fusion_lookahead = ParseBoolSetting(var, v);
  });
  IfSet(env, "HOROVOD_STALL_CHECK_TIME_SECONDS", [&](auto var, auto v) {
    s.stall_check_seconds = ParseFloatSetting(var, v, 0.0, 1e9, false);
  });
  IfSet(env, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", [&](auto var, auto v) {
    s.stall_shutdown_seconds = ParseFloatSetting(var, v, 0.0, 1e9, false);
  });
  c.autotune = ParseAutotuneSettings(env);
  c.telemetry = ParseTelemetrySettings(env);
  return c;
}

}  // namespace hvdtune
