// The runtime's whole configuration, parsed once: knob values (and which the
// user pinned), the other settings, and the autotuner's settings. Every
// HOROVOD_* / HVDTUNE_* variable is read here and nowhere else.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hvdtune/events.h"
#include "hvdtune/knobs.h"

namespace hvdtune {

/// HVDTUNE_AUTOTUNE_STORE: what the autotuner does with the config store.
enum class AutotuneStoreMode {
  /// "auto" (default): warm start from the store (an exact match is only
  /// confirmed, a similar job's samples seed the optimizer) and record
  /// every sample.
  kAuto,
  /// "apply": apply the stored best configuration without scoring or
  /// tuning (production jobs that must not explore); nothing stored: the
  /// initial knobs, untuned.
  kApply,
  /// "off": neither read nor write the store.
  kOff,
};
/// "auto", "apply", "off".
const char* AutotuneStoreModeName(AutotuneStoreMode mode);

/// HOROVOD_AUTOTUNE_* settings (Horovod's names and defaults) plus ours.
struct AutotuneSettings {
  bool enabled = false;       // HOROVOD_AUTOTUNE
  std::string log_path;       // HOROVOD_AUTOTUNE_LOG
  int warmup_samples = 3;     // HOROVOD_AUTOTUNE_WARMUP_SAMPLES
  int steps_per_sample = 10;  // HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE
  /// HVDTUNE_AUTOTUNE_SAMPLE_PRECISION: a sample takes more steps until
  /// the 95% confidence half-width of its score is at most this fraction
  /// (0: exactly steps_per_sample steps).
  double sample_precision = 0.1;
  /// HVDTUNE_AUTOTUNE_MAX_SAMPLE_SECONDS: caps an adaptive sample (0: no
  /// time cap).
  double max_sample_seconds = 3.0;
  /// HVDTUNE_AUTOTUNE_MAX_STEPS_PER_SAMPLE: caps an adaptive sample (0:
  /// 10 x steps_per_sample).
  int max_steps_per_sample = 0;
  /// HVDTUNE_AUTOTUNE_WATCH_SAMPLE_SECONDS: frozen samples and those
  /// confirming a stored best last at least this long (adaptive samples
  /// only; 0: sized like the others).
  double watch_sample_seconds = 2.0;
  int max_samples = 20;  // HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES
  /// HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE.
  double gaussian_process_noise = 0.8;
  /// HVDTUNE_AUTOTUNE_RETUNE_DROP: relative score drop after freezing that
  /// counts as degraded (0 disables re-tuning).
  double retune_drop = 0.15;
  /// HVDTUNE_AUTOTUNE_RETUNE_WINDOWS: consecutive degraded samples that
  /// re-open tuning.
  int retune_windows = 3;
  /// HVDTUNE_AUTOTUNE_SEED: the optimizer's seed.
  std::uint64_t seed = 1;
  /// HOROVOD_AUTOTUNE_DB: the config store's SQLite file, or a
  /// postgresql:// (postgres://) URI for a PostgreSQL server. Unset:
  /// $XDG_STATE_HOME/hvdtune/store.db, else $HOME/.local/state/hvdtune/
  /// store.db (both read through the same EnvLookup); empty when neither
  /// variable is set (no store).
  std::string db_path;
  AutotuneStoreMode store_mode = AutotuneStoreMode::kAuto;
};

/// Settings that are not knobs.
struct RuntimeSettings {
  /// HVDTUNE_RANKS_PER_NODE: emulate nodes of this many consecutive ranks
  /// (0 = ask MPI which ranks share memory).
  int ranks_per_node = 0;
  /// HVDTUNE_FUSION_LOOKAHEAD: fuse each dtype/op in its own buffer (true)
  /// or close the buffer whenever the dtype changes (false, for
  /// comparison).
  bool fusion_lookahead = true;
  /// HVDTUNE_CYCLE_THREAD_SLICE_US: the scheduler time slice the cycle
  /// thread asks for, in microseconds (Linux 6.12 and later honour it), so
  /// that it preempts a training thread when it wakes; 0 = the kernel's.
  int cycle_thread_slice_us = 100;
  /// HOROVOD_STALL_CHECK_TIME_SECONDS: rank 0 warns about tensors that some
  /// ranks submitted and others did not for this long (0 = no check).
  double stall_check_seconds = 60;
  /// HOROVOD_STALL_SHUTDOWN_TIME_SECONDS: such tensors fail on the ranks
  /// that submitted them after this long (0 = never).
  double stall_shutdown_seconds = 0;
};

/// Metrics endpoint and timeline (metrics/, timeline/).
struct TelemetrySettings {
  /// HOROVOD_METRICS_PORT: base port of the /metrics endpoints (a rank
  /// listens on base + local rank; 0 = any free port; -1 = unset, none).
  int metrics_port = -1;
  /// HVDTUNE_METRICS_ADDRESS: the IPv4 or IPv6 address they bind.
  std::string metrics_address = "127.0.0.1";
  /// HOROVOD_TIMELINE: Chrome-trace file written by rank 0 (empty = none;
  /// HOROVOD_TIMELINE=DYNAMIC leaves it empty: Runtime::StartTimeline
  /// starts one later, as in Horovod).
  std::string timeline_path;
  /// HOROVOD_TIMELINE_MARK_CYCLES: mark every active cycle in the timeline.
  bool timeline_mark_cycles = false;
};

/// What a rank of a Gloo job is told by its launcher (hvd-tune run --gloo,
/// or any launcher that sets these variables).
struct GlooSettings {
  /// HOROVOD_RANK, HOROVOD_SIZE: this process in the launched job.
  int rank = 0, size = 1;
  /// HOROVOD_HOSTNAME: the node's name (ranks with the same name share a
  /// node); empty: this machine's host name.
  std::string hostname;
  /// HOROVOD_GLOO_RENDEZVOUS_ADDR / _PORT: the rendezvous store.
  std::string rendezvous_addr;
  int rendezvous_port = 0;
  /// HOROVOD_GLOO_IFACE: the network interface of the ranks' Gloo
  /// traffic; empty: the address the host name resolves to.
  std::string iface;
  /// HOROVOD_GLOO_TIMEOUT_SECONDS: the longest a Gloo wait (the
  /// rendezvous, a collective) lasts before it fails.
  double timeout_seconds = 30;
  /// HVDTUNE_GLOO_STORE_PREFIX: put before every key this rank's contexts
  /// (and the launcher's lost-rank marks) use in the store, so that each
  /// world an elastic launcher forms meets under keys of its own.
  std::string store_prefix;
  /// HOROVOD_ELASTIC_TIMEOUT: in an elastic job, how long a rank waits for
  /// the launcher's next world (checked here; the Python layer waits).
  double elastic_timeout_seconds = 600;
  /// Set by the elastic layer in each world it joins (metrics, timeline):
  /// HVDTUNE_ELASTIC_WORLD, the world's version (-1: not elastic);
  /// HVDTUNE_ELASTIC_RESETS, "cause=count,..." of this process's resets;
  /// HVDTUNE_ELASTIC_LAST_RESET, the cause of the reset into this world
  /// (empty: the process's first world).
  ElasticInfo elastic;
};

struct RuntimeConfig {
  /// The engine: Gloo when HOROVOD_GLOO=1, HOROVOD_CONTROLLER=gloo or
  /// HOROVOD_CPU_OPERATIONS=gloo (they must not disagree), else MPI.
  EngineKind engine = EngineKind::kMpi;
  /// The Gloo launcher's variables (read only for the Gloo engine).
  GlooSettings gloo;
  KnobConfig knobs;
  RuntimeSettings settings;
  AutotuneSettings autotune;
  TelemetrySettings telemetry;
  /// The application splits its gradient list into knobs num_groups groups,
  /// so the autotuner may tune num_groups (not an environment setting).
  bool tune_num_groups = false;
  /// The ranks of MPI_COMM_WORLD the runtime spans, ascending (a process
  /// set: only they construct it); empty: all of them. Not an environment
  /// setting.
  std::vector<int> ranks;
};

/// Parses every HOROVOD_* / HVDTUNE_* setting strictly. Throws ConfigError
/// naming the variable, the value and what is allowed.
RuntimeConfig ParseConfig(const EnvLookup& env);

/// Parses the engine's settings alone (part of ParseConfig): c->engine and,
/// for Gloo, c->gloo. A rank whose other settings are bad still joins its
/// engine with them, so that the ranks vote on the error together.
void ParseEngineSettings(const EnvLookup& env, RuntimeConfig* c);

/// Parses the metrics and timeline settings alone (part of ParseConfig).
TelemetrySettings ParseTelemetrySettings(const EnvLookup& env);

/// Parses the autotune settings alone (part of ParseConfig).
AutotuneSettings ParseAutotuneSettings(const EnvLookup& env);

/// One setting that is not a knob, as users read it: the variable, its
/// default, what it accepts and what it does. ParseConfig reads exactly the
/// variables of the knob table and of this list (a test checks it), and the
/// configuration reference is generated from the two.
struct SettingSpec {
  /// The reference's section: "Runtime", "Autotuning", "Config store",
  /// "Metrics and timeline", or "Open MPI" (set by hvdtune for Open MPI,
  /// not read by ParseConfig).
  std::string_view section;
  std::string_view env;
  std::string_view default_text;
  std::string_view accepted;
  std::string_view description;
};

/// Every setting that is not a knob, in the reference's order.
std::span<const SettingSpec> SettingsTable();

/// The configuration reference in Markdown: the knob table, then one table
/// per section of SettingsTable(). `hvd-tune knobs --markdown` prints it;
/// docs/configuration.md holds it between its config-reference markers.
std::string ConfigReferenceMarkdown();

}  // namespace hvdtune
