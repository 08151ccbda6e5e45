#include "hvdtune/config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

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

// The algorithm knob names a choice the engine serves.
void CheckAlgorithmServed(const RuntimeConfig& c) {
  const KnobSpec& algo = GetKnobSpec(KnobId::kAllreduceAlgorithm);
  const auto chosen =
      static_cast<std::size_t>(c.knobs.values.allreduce_algorithm());
  if (!algo.Serves(c.engine, chosen)) {
    throw ConfigError(std::string(algo.env) + "=" +
                      std::string(algo.choices[chosen]) + " is served by the " +
                      (c.engine == EngineKind::kMpi ? "Gloo" : "MPI") +
                      " engine only (this job runs on " +
                      std::string(EngineName(c.engine)) + ")");
  }
}

// HOROVOD_CONTROLLER / HOROVOD_CPU_OPERATIONS: "mpi" or "gloo".
EngineKind EngineValue(std::string_view var, std::string_view v) {
  if (v == "mpi" || v == "MPI") return EngineKind::kMpi;
  if (v == "gloo" || v == "GLOO") return EngineKind::kGloo;
  throw ConfigError(std::string(var) + "='" + std::string(v) +
                    "' is not allowed: use mpi or gloo");
}

// HVDTUNE_ELASTIC_WORLD / _RESETS / _LAST_RESET, set by the elastic layer
// in every world it joins.
void ParseElasticInfo(const EnvLookup& env, ElasticInfo& e) {
  IfSet(env, "HVDTUNE_ELASTIC_WORLD",
        [&](auto var, auto v) { e.world = Int(var, v, 0, 1 << 30); });
  IfSet(env, "HVDTUNE_ELASTIC_RESETS", [&](auto var, auto v) {
    std::string_view rest = v;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
      const auto eq = item.find('=');
      const std::string_view cause = item.substr(0, eq);
      if (eq == std::string_view::npos ||
          std::find(std::begin(kElasticResetCauses),
                    std::end(kElasticResetCauses),
                    cause) == std::end(kElasticResetCauses)) {
        throw ConfigError(std::string(var) + "='" + std::string(v) +
                          "': expected cause=count,... with causes of "
                          "docs/elastic.md (rank_lost, hosts_added, ...)");
      }
      e.resets.emplace_back(std::string(cause),
                            Int(var, item.substr(eq + 1), 0, 1 << 30));
    }
  });
  IfSet(env, "HVDTUNE_ELASTIC_LAST_RESET",
        [&](auto, auto v) { e.last_reset = std::string(v); });
}

}  // namespace

void ParseEngineSettings(const EnvLookup& env, RuntimeConfig* c) {
  // Each variable that names an engine, with the engine it names.
  std::vector<std::pair<std::string, EngineKind>> named;
  IfSet(env, "HOROVOD_GLOO", [&](auto var, auto v) {
    named.emplace_back(
        std::string(var) + "=" + std::string(v),
        ParseBoolSetting(var, v) ? EngineKind::kGloo : EngineKind::kMpi);
  });
  for (const char* var : {"HOROVOD_CONTROLLER", "HOROVOD_CPU_OPERATIONS"}) {
    IfSet(env, var, [&](auto name, auto v) {
      named.emplace_back(std::string(name) + "=" + std::string(v),
                         EngineValue(name, v));
    });
  }
  for (const auto& [setting, engine] : named) {
    if (engine != named.front().second) {
      throw ConfigError(
          named.front().first + " and " + setting +
          " disagree: the negotiation and the host collectives run on one "
          "engine (mpi or gloo)");
    }
  }
  if (!named.empty()) c->engine = named.front().second;
  if (c->engine != EngineKind::kGloo) return;
  GlooSettings& g = c->gloo;
  const auto required = [&](std::string_view var) {
    auto v = env(var);
    if (!v || v->empty()) {
      throw ConfigError(std::string(var) +
                        " is not set: the Gloo engine needs the variables "
                        "its launcher sets (hvd-tune run --gloo)");
    }
    return *v;
  };
  g.size = Int("HOROVOD_SIZE", required("HOROVOD_SIZE"), 1, 1 << 20);
  g.rank = Int("HOROVOD_RANK", required("HOROVOD_RANK"), 0, g.size - 1);
  g.rendezvous_addr = required("HOROVOD_GLOO_RENDEZVOUS_ADDR");
  g.rendezvous_port = Int("HOROVOD_GLOO_RENDEZVOUS_PORT",
                          required("HOROVOD_GLOO_RENDEZVOUS_PORT"), 1, 65535);
  IfSet(env, "HOROVOD_HOSTNAME",
        [&](auto, auto v) { g.hostname = std::string(v); });
  IfSet(env, "HOROVOD_GLOO_IFACE",
        [&](auto, auto v) { g.iface = std::string(v); });
  IfSet(env, "HOROVOD_GLOO_TIMEOUT_SECONDS", [&](auto var, auto v) {
    g.timeout_seconds = ParseFloatSetting(var, v, 0.0, 1e6, true);
  });
  IfSet(env, "HOROVOD_ELASTIC_TIMEOUT", [&](auto var, auto v) {
    g.elastic_timeout_seconds = ParseFloatSetting(var, v, 0.0, 1e7, false);
  });
  IfSet(env, "HVDTUNE_GLOO_STORE_PREFIX",
        [&](auto, auto v) { g.store_prefix = std::string(v); });
  ParseElasticInfo(env, g.elastic);
}

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
  IfSet(env, "HVDTUNE_AUTOTUNE_SAMPLE_PRECISION", [&](auto var, auto v) {
    s.sample_precision = ParseFloatSetting(var, v, 0.0, 1.0, false);
  });
  IfSet(env, "HVDTUNE_AUTOTUNE_MAX_SAMPLE_SECONDS", [&](auto var, auto v) {
    s.max_sample_seconds = ParseFloatSetting(var, v, 0.0, 1e6, false);
  });
  IfSet(env, "HVDTUNE_AUTOTUNE_WATCH_SAMPLE_SECONDS", [&](auto var, auto v) {
    s.watch_sample_seconds = ParseFloatSetting(var, v, 0.0, 1e6, false);
  });
  IfSet(env, "HVDTUNE_AUTOTUNE_MAX_STEPS_PER_SAMPLE", [&](auto var, auto v) {
    s.max_steps_per_sample = Int(var, v, 0, 1000000);
    if (s.max_steps_per_sample != 0 &&
        s.max_steps_per_sample < s.steps_per_sample) {
      throw ConfigError(
          "invalid value '" + std::string(v) + "' for " + std::string(var) +
          ": expected 0 or at least HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE (" +
          std::to_string(s.steps_per_sample) + ")");
    }
  });
  IfSet(env, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
        [&](auto var, auto v) { s.max_samples = Int(var, v, 1, 10000); });
  IfSet(env, "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", [&](auto var, auto v) {
    s.gaussian_process_noise = ParseFloatSetting(var, v, 0.0, 100.0, true);
  });
  IfSet(env, "HVDTUNE_AUTOTUNE_RETUNE_DROP", [&](auto var, auto v) {
    s.retune_drop = ParseFloatSetting(var, v, 0.0, 1.0, false);
    // A drop of 1 (100%) can never happen; the tuner refuses it, so refuse
    // it here, at init, rather than leave the job silently untuned.
    if (s.retune_drop >= 1.0) {
      throw ConfigError("invalid value '" + std::string(v) + "' for " +
                        std::string(var) +
                        ": expected a number from 0 to below 1");
    }
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
    // Horovod's switch for a timeline started later (StartTimeline), not
    // a file name.
    if (v != "DYNAMIC") s.timeline_path = std::string(v);
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
  IfSet(env, "HVDTUNE_CYCLE_THREAD_SLICE_US", [&](auto var, auto v) {
    const int us = Int(var, v, 0, 100000);
    if (us != 0 && us < 100) {
      throw ConfigError(std::string(var) + "='" + std::string(v) +
                        "': expected 0 (the kernel's slice) or 100 - 100000 "
                        "microseconds (the kernel's range)");
    }
    s.cycle_thread_slice_us = us;
  });
  IfSet(env, "HOROVOD_STALL_CHECK_TIME_SECONDS", [&](auto var, auto v) {
    s.stall_check_seconds = ParseFloatSetting(var, v, 0.0, 1e9, false);
  });
  IfSet(env, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", [&](auto var, auto v) {
    s.stall_shutdown_seconds = ParseFloatSetting(var, v, 0.0, 1e9, false);
  });
  ParseEngineSettings(env, &c);
  CheckAlgorithmServed(c);
  c.autotune = ParseAutotuneSettings(env);
  c.telemetry = ParseTelemetrySettings(env);
  return c;
}

}  // namespace hvdtune

namespace hvdtune {
namespace {

constexpr SettingSpec kSettings[] = {
    {"Runtime", "HOROVOD_HIERARCHICAL_ALLREDUCE", "unset", "0, 1, true, false",
     "Horovod's spelling of the algorithm knob: 1 pins allreduce_algorithm "
     "to hierarchical, 0 to native. Set together with "
     "HVDTUNE_ALLREDUCE_ALGORITHM, the two must agree."},
    {"Runtime", "HVDTUNE_RANKS_PER_NODE", "unset (ask MPI)", "1 – 1048576",
     "Group consecutive ranks into emulated nodes of this many ranks instead "
     "of asking MPI which ranks share memory; sets local_* and cross_*. All "
     "traffic stays where MPI puts it (the layout only)."},
    {"Runtime", "HVDTUNE_FUSION_LOOKAHEAD", "1", "0, 1, true, false",
     "1: each dtype/op fuses in its own buffer (fp16 and fp32 tensors ready "
     "in one cycle do not break each other's fusion); 0: a dtype change "
     "closes the buffer (for comparison)."},
    {"Runtime", "HVDTUNE_CYCLE_THREAD_SLICE_US", "100", "0, 100 – 100000",
     "Scheduler time slice the cycle thread (named hvdtune-cycle) asks the "
     "kernel for, in microseconds. Linux 6.12 and later honour it: a woken "
     "cycle thread then preempts a training thread on its core instead of "
     "waiting out that thread's slice, which keeps negotiation rounds and "
     "ring steps short where ranks share cores. On the Gloo engine Gloo's "
     "event-loop thread (hvdtune-gloo) gets the same slice. 0 = the "
     "kernel's slice; older kernels ignore it."},
    {"Runtime", "HOROVOD_STALL_CHECK_TIME_SECONDS", "60", "0 – 1e9",
     "Rank 0 warns, every this many seconds, about each tensor that some "
     "ranks submitted and others did not, naming the tensor and the missing "
     "ranks; every rank also warns while the negotiation waits for ranks "
     "that stopped calling into hvdtune, and once about a collective that "
     "has waited this long inside MPI, naming the ranks that do not answer "
     "it (dead, stopped or cut off; needs MPI_THREAD_MULTIPLE). 0 = no "
     "check."},
    {"Runtime", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "0", "0 – 1e9",
     "After this long such a tensor fails with STALLED on the ranks that "
     "submitted it (the job goes on); a negotiation that waits this long for "
     "stopped ranks stops the runtime: pending handles fail with STALLED and "
     "shutdown returns. A collective that has run this long inside MPI (a "
     "peer or the link to its node gone; a transfer in progress cannot be "
     "abandoned) ends the job with MPI_Abort and a message on every rank "
     "that sees it, naming the ranks that do not answer: set it above the "
     "longest cycle's transfer. 0 = wait forever."},
    {"Autotuning", "HOROVOD_AUTOTUNE", "0", "0, 1, true, false",
     "1 turns on online autotuning of every knob not set in the "
     "environment."},
    {"Autotuning", "HOROVOD_AUTOTUNE_LOG", "unset", "a file path",
     "CSV file written by rank 0, one row per sample: Horovod's columns for "
     "the knobs that have one, then score (bytes/s), sample, phase, "
     "timestamp, then every knob by its table name, then the sample's "
     "steps, seconds and precision."},
    {"Autotuning", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "3", "0 – 1000",
     "Samples measured under the initial knobs before tuning; the last one "
     "is the initial configuration's score."},
    {"Autotuning", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "10", "1 – 100000",
     "Training steps per sample (the least, unless "
     "HVDTUNE_AUTOTUNE_SAMPLE_PRECISION is 0); a sample's score is the "
     "median of its steps' throughput."},
    {"Autotuning", "HVDTUNE_AUTOTUNE_SAMPLE_PRECISION", "0.1", "0 – 1",
     "After HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE steps a sample takes more "
     "until the 95% confidence half-width of its score is at most this "
     "fraction (from the median absolute deviation of the steps' log "
     "throughput), or a cap below is reached. 0: every sample is exactly "
     "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE steps."},
    {"Autotuning", "HVDTUNE_AUTOTUNE_MAX_SAMPLE_SECONDS", "3", "0 – 1e6",
     "A sample of at least HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE steps closes "
     "once its steps took this many seconds, however imprecise; 0 = no time "
     "cap."},
    {"Autotuning", "HVDTUNE_AUTOTUNE_MAX_STEPS_PER_SAMPLE",
     "0 (10 x HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE)",
     "0, or HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE – 1000000",
     "A sample closes at this many steps, however imprecise (at least "
     "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE)."},
    {"Autotuning", "HVDTUNE_AUTOTUNE_WATCH_SAMPLE_SECONDS", "2", "0 – 1e6",
     "Samples that watch rather than explore (after the freeze, where a "
     "lasting drop re-opens tuning, and those confirming a best "
     "configuration from the store) last at least this many seconds, "
     "whatever the caps above: a drop shorter than about half of it (a "
     "neighbour's burst of load) cannot move their median, while a change "
     "that lasts moves every step. Only with "
     "HVDTUNE_AUTOTUNE_SAMPLE_PRECISION > 0. 0 = sized like the others."},
    {"Autotuning", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "20", "1 – 10000",
     "Samples in the exploration budget (the initial configuration counts as "
     "the first)."},
    {"Autotuning", "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.8",
     "> 0 – 100",
     "Noise level v of the scores: the GP infers its noise variance but "
     "never below (v/10)² of the standardised score variance."},
    {"Autotuning", "HVDTUNE_AUTOTUNE_RETUNE_DROP", "0.15", "0 to below 1",
     "The smallest lasting change worth re-tuning for: after freezing, a "
     "fall or rise of the score smaller than this (or than the frozen "
     "samples' spread) never re-tunes, however long it lasts; 0 never "
     "re-tunes. Also the drop from a stored score that makes a job re-tune "
     "instead of trusting the store."},
    {"Autotuning", "HVDTUNE_AUTOTUNE_RETUNE_WINDOWS", "3", "1 – 100000",
     "Samples after which a lasting change of max(4, slack + 1) spreads or "
     "more (a fall or rise of 20% on a quiet job) re-opens tuning around "
     "the incumbent (the CUSUM threshold is this - 1)."},
    {"Autotuning", "HVDTUNE_AUTOTUNE_SEED", "1", "0 – 2^63-1",
     "Seed of the optimizer: runs are reproducible for a given sequence of "
     "scores."},
    {"Config store", "HOROVOD_AUTOTUNE_DB",
     "$XDG_STATE_HOME/hvdtune/store.db, else "
     "$HOME/.local/state/hvdtune/store.db",
     "a file path, or postgresql://USER@HOST:PORT/DB?...",
     "The config store, read and written by rank 0 only: an SQLite file "
     "(its directory is created when missing) or a PostgreSQL server "
     "shared by many jobs (a libpq URI)."},
    {"Config store", "HVDTUNE_AUTOTUNE_STORE", "auto", "auto, apply, off",
     "auto: start from the store and record every sample; apply: apply the "
     "stored best configuration without tuning (nothing stored: the initial "
     "knobs, untuned); off: neither read nor write the store."},
    {"Metrics and timeline", "HOROVOD_METRICS_PORT", "unset (no endpoint)",
     "0 – 65535",
     "Base port: a rank serves /metrics on base + its local rank; 0 = any "
     "free port. Each rank prints its address once; a port in use gives one "
     "warning and the job goes on without that endpoint."},
    {"Metrics and timeline", "HVDTUNE_METRICS_ADDRESS", "127.0.0.1",
     "an IPv4 or IPv6 address",
     "Address the endpoints bind; 0.0.0.0 for every interface, so that a "
     "Prometheus on another host can scrape."},
    {"Metrics and timeline", "HOROVOD_TIMELINE", "unset",
     "a file path, or DYNAMIC",
     "Chrome-trace JSON file written by rank 0 (Horovod's timeline "
     "format). DYNAMIC: none at start; the application starts and stops "
     "one with start_timeline / stop_timeline (Runtime::StartTimeline)."},
    {"Metrics and timeline", "HOROVOD_TIMELINE_MARK_CYCLES", "0",
     "0, 1, true, false",
     "Also mark the start of every active cycle (CYCLE_START) in the "
     "timeline."},
    {"Gloo engine", "HOROVOD_GLOO", "unset (MPI)", "0, 1, true, false",
     "1: the negotiation and the host collectives run on Gloo's TCP "
     "transport instead of MPI (as HOROVOD_CONTROLLER=gloo and "
     "HOROVOD_CPU_OPERATIONS=gloo); the ranks meet through the rendezvous "
     "store of hvd-tune run --gloo, no MPI is initialised. See "
     "docs/gloo.md."},
    {"Gloo engine", "HOROVOD_CONTROLLER", "mpi", "mpi, gloo",
     "The negotiation's engine; must agree with HOROVOD_CPU_OPERATIONS and "
     "HOROVOD_GLOO (one engine does both)."},
    {"Gloo engine", "HOROVOD_CPU_OPERATIONS", "mpi", "mpi, gloo",
     "The host collectives' engine; must agree with HOROVOD_CONTROLLER."},
    {"Gloo engine", "HOROVOD_RANK", "set by the launcher", "0 – size - 1",
     "Gloo: this process's rank in the launched job."},
    {"Gloo engine", "HOROVOD_SIZE", "set by the launcher", "1 – 1048576",
     "Gloo: the number of ranks launched."},
    {"Gloo engine", "HOROVOD_HOSTNAME", "this machine's host name", "a name",
     "Gloo: ranks with the same name form a node (local and cross ranks, "
     "hierarchical algorithms), unless HVDTUNE_RANKS_PER_NODE is set."},
    {"Gloo engine", "HOROVOD_GLOO_RENDEZVOUS_ADDR", "set by the launcher",
     "an address or host name",
     "Gloo: where the rendezvous store listens (hvd-tune run --gloo serves "
     "it)."},
    {"Gloo engine", "HOROVOD_GLOO_RENDEZVOUS_PORT", "set by the launcher",
     "1 – 65535", "Gloo: the rendezvous store's port."},
    {"Gloo engine", "HOROVOD_GLOO_IFACE", "the host name's address",
     "an interface name",
     "Gloo: the network interface the ranks' traffic uses (lo for a job on "
     "one machine)."},
    {"Gloo engine", "HOROVOD_GLOO_TIMEOUT_SECONDS", "30", "> 0 – 1e6",
     "Gloo: the longest any wait lasts (the rendezvous, a negotiation, a "
     "collective) before it fails with an error on the handles naming the "
     "ranks the launcher saw die. A rank that dies is seen at once (its "
     "connections close); a stopped or cut-off one after this time."},
    {"Gloo engine", "HVDTUNE_GLOO_STORE_PREFIX", "empty", "any text",
     "Gloo: put before every key the ranks use in the rendezvous store. The "
     "elastic launcher sets it per world (elastic/N/ for world N), so that "
     "each world's ranks meet apart from the previous world's."},
    {"Elastic", "HOROVOD_ELASTIC_TIMEOUT", "600", "0 – 1e7 seconds",
     "Elastic training (hvd-tune run --host-discovery-script): how long the "
     "launcher waits for --min-np slots (at the start and after a reset) "
     "before it ends the job with an error saying so; the ranks waiting for "
     "a next world wait this long plus 60 s."},
    {"Elastic", "HVDTUNE_ELASTIC_WORLD",
     "set by the launcher and hvdtune.elastic", "a version",
     "Elastic training: the world a rank runs in, for the metrics and the "
     "timeline."},
    {"Elastic", "HVDTUNE_ELASTIC_RESETS",
     "set by the launcher and hvdtune.elastic", "cause=count,...",
     "Elastic training: the resets so far by cause, for the metrics."},
    {"Elastic", "HVDTUNE_ELASTIC_LAST_RESET",
     "set by the launcher and hvdtune.elastic", "a cause",
     "Elastic training: the cause of the last reset, for the metrics and "
     "the timeline."},
    {"Elastic launcher", "HOROVOD_START_TIMEOUT", "30", "> 0 – 1e6 seconds",
     "Read by hvd-tune run: how long a world's ranks have to reach it after "
     "the launcher publishes it (a new rank arrives at its `hvd.init()`); a "
     "rank not there by then fails its host (blacklisted, its ranks "
     "stopped) and the world forms from the others. `hvd-tune run "
     "--start-timeout` overrides it."},
    {"Elastic launcher", "HVDTUNE_ELASTIC_HEARTBEAT_SECONDS", "10",
     "0 (off), 1 – 1e6 seconds",
     "Read by hvd-tune run: every rank tells the launcher it is alive every "
     "0.5 s, and a rank silent this long (its host cut off or hung) counts "
     "as failed: its host is blacklisted and its ranks stopped. Its "
     "survivors' collectives end at HOROVOD_GLOO_TIMEOUT_SECONDS."},
    {"Open MPI", "OMPI_MCA_mpi_yield_when_idle",
     "1 when hvdtune initialises MPI", "0, 1",
     "Open MPI's own parameter, set by hvdtune before MPI_Init_thread unless "
     "already set: a thread waiting inside MPI yields its core instead of "
     "busy-polling, so the cycle thread does not take the core from the "
     "training thread. 0 restores busy polling; an application that "
     "initialises MPI itself decides for itself."},
};

}  // namespace

std::span<const SettingSpec> SettingsTable() { return kSettings; }

std::string ConfigReferenceMarkdown() {
  std::string out =
      "### Knobs\n\nSetting a knob's variable pins it: the tuner never "
      "changes it.\n\n" +
      KnobTableMarkdown();
  std::string_view section;
  for (const SettingSpec& s : kSettings) {
    if (s.section != section) {
      section = s.section;
      out += "\n### " + std::string(section) +
             "\n\n| variable | default | accepted | meaning |\n"
             "|---|---|---|---|\n";
    }
    out += "| `" + std::string(s.env) + "` | " + std::string(s.default_text) +
           " | " + std::string(s.accepted) + " | " +
           std::string(s.description) + " |\n";
  }
  return out;
}

}  // namespace hvdtune
