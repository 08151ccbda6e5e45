// hvd-tune doctor: is this machine and environment ready for hvdtune? Each
// check says ok, warn or FAIL, and what to do about it.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "commands.h"
#include "common.h"
#include "fingerprint_util.h"
#include "hvdtune/config.h"
#include "hvdtune/mpi.h"
#include "hvdtune/status.h"
#include "hvdtune/store/fingerprint.h"

extern char** environ;

namespace hvdtune::cli {
namespace {

struct Check {
  std::string name, status, detail, fix;
};

struct DoctorOptions {
  std::string db;
  int metrics_port = -1;
  int ranks = 1;
  bool json = false;
};

// First line of a command's output; empty when it cannot run.
std::string FirstLine(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(command.c_str(), "r"), pclose);
  if (!p) return {};
  char buf[512] = {};
  if (!std::fgets(buf, sizeof buf, p.get())) return {};
  std::string line(buf);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
    line.pop_back();
  }
  return line;
}

void CheckMpi(std::vector<Check>& out) {
  const std::string lib = MpiLibraryVersion();
  const char* env = std::getenv("HVDTUNE_MPIRUN");
  const std::string mpirun = env && *env ? env : "mpirun";
  const std::string launcher =
      FirstLine("'" + mpirun + "' --version 2>/dev/null");
  if (launcher.empty()) {
    out.push_back({"mpi", "FAIL",
                   "library " + lib + ", but " + mpirun + " does not run",
                   "install Open MPI (Debian: openmpi-bin) or set "
                   "HVDTUNE_MPIRUN to its mpirun"});
    return;
  }
  // "mpirun (Open MPI) 4.1.4" beside "Open MPI v4.1.4".
  const std::string version = launcher.substr(launcher.rfind(' ') + 1);
  if (lib.find(version) == std::string::npos) {
    out.push_back({"mpi", "warn",
                   "library " + lib + " but launcher '" + launcher + "'",
                   "use the mpirun of the MPI hvdtune was built with"});
    return;
  }
  out.push_back({"mpi", "ok", lib + ", launcher " + mpirun, ""});
}

void CheckGpu(std::vector<Check>& out) {
  const store::HostFacts host = store::ProbeHost();
  const bool built = HVDTUNE_HAVE_CUDA != 0;
  const std::string gpus =
      host.gpu_count > 0 ? fmt::format("{} x {} (driver {})", host.gpu_count,
                                       host.gpu_model, host.gpu_driver)
                         : "no NVIDIA GPU";
  if (built) {
    out.push_back({"cuda", "ok",
                   "built with the NCCL backend (CUDA " +
                       (host.cuda_version.empty() ? std::string("?")
                                                  : host.cuda_version) +
                       "); " + gpus +
                       (host.gpu_count > 0 ? "" : ": device tensors unused"),
                   ""});
  } else if (host.gpu_count > 0) {
    out.push_back({"cuda", "warn", "built without CUDA/NCCL, but " + gpus,
                   "rebuild with -DHVDTUNE_WITH_CUDA=ON to reduce GPU "
                   "tensors with NCCL"});
  } else {
    out.push_back({"cuda", "ok", "built without CUDA/NCCL; " + gpus, ""});
  }
}

// The nearest existing directory at or above `p`.
std::filesystem::path ExistingAncestor(std::filesystem::path p) {
  while (!p.empty() && !std::filesystem::exists(p)) p = p.parent_path();
  return p.empty() ? std::filesystem::path(".") : p;
}

// A PostgreSQL store: the connection (login, TLS as the URI asks), the
// schema version and the integrity check, read-only.
void CheckServerStore(const std::string& uri, std::vector<Check>& out) {
  const std::string name = store::DisplayLocation(uri);
  try {
    store::StoreOptions options{uri};
    options.read_only = true;
    store::Store db(options);
    const int version = db.schema_version();
    const std::string integrity = db.IntegrityCheck();
    const std::string detail =
        fmt::format("{}: connected, schema version {}, integrity {}", name,
                    version, integrity);
    if (integrity != "ok") {
      out.push_back({"store", "FAIL", detail,
                     "export what still reads and import it into a new "
                     "database"});
    } else if (version < store::kSchemaVersion) {
      out.push_back({"store", "warn", detail,
                     fmt::format("it is migrated to version {} by the first "
                                 "job or import (a role that may create "
                                 "tables)",
                                 store::kSchemaVersion)});
    } else {
      out.push_back({"store", "ok", detail, ""});
    }
  } catch (const store::StoreUnavailable& e) {
    out.push_back({"store", "FAIL", e.what(),
                   "check that the server runs and is reachable, the URI, "
                   "and the password (PGPASSFILE, ~/.pgpass or PGPASSWORD)"});
  } catch (const std::exception& e) {
    out.push_back({"store", "FAIL", e.what(),
                   "point HOROVOD_AUTOTUNE_DB at another database"});
  }
}

void CheckStore(const std::string& flag, std::vector<Check>& out) {
  std::string path;
  try {
    path = ResolveStorePath(flag);
  } catch (const std::exception& e) {
    out.push_back({"store", "FAIL", e.what(), "set HOROVOD_AUTOTUNE_DB"});
    return;
  }
  if (store::IsServerLocation(path)) {
    CheckServerStore(path, out);
    return;
  }
  const std::filesystem::path file(path);
  if (!std::filesystem::exists(file)) {
    const auto dir = ExistingAncestor(file.parent_path());
    if (access(dir.c_str(), W_OK) != 0) {
      out.push_back(
          {"store", "FAIL",
           path + " does not exist and " + dir.string() + " is not writable",
           "point HOROVOD_AUTOTUNE_DB at a writable location"});
    } else {
      out.push_back({"store", "ok", path + " (created on first use)", ""});
    }
    return;
  }
  if (access(path.c_str(), W_OK) != 0 ||
      access(file.parent_path().empty() ? "." : file.parent_path().c_str(),
             W_OK) != 0) {
    out.push_back({"store", "FAIL", path + " is not writable",
                   "fix its permissions or point HOROVOD_AUTOTUNE_DB "
                   "elsewhere"});
    return;
  }
  try {
    store::StoreOptions options{path};
    options.read_only = true;
    store::Store db(options);
    const std::string integrity = db.IntegrityCheck();
    const int version = db.schema_version();
    if (integrity != "ok") {
      out.push_back({"store", "FAIL",
                     path + ": integrity check says '" + integrity + "'",
                     "move the file away (hvd-tune export what still reads) "
                     "and start a new store"});
      return;
    }
    std::string detail =
        fmt::format("{}: schema version {}, integrity ok", path, version);
    const std::string fs = store::NetworkFileSystem(path);
    if (version < store::kSchemaVersion) {
      out.push_back({"store", "warn", detail,
                     fmt::format("it is migrated to version {} on the next "
                                 "write (keep a copy if older builds read it)",
                                 store::kSchemaVersion)});
    } else if (!fs.empty()) {
      out.push_back({"store", "warn", detail + ", on " + fs,
                     "a network file system: only one host should write it "
                     "at a time"});
    } else {
      out.push_back({"store", "ok", detail, ""});
    }
  } catch (const std::exception& e) {
    out.push_back({"store", "FAIL", e.what(),
                   "move the file away or point HOROVOD_AUTOTUNE_DB "
                   "elsewhere"});
  }
}

void CheckMetricsPort(const DoctorOptions& opt, const TelemetrySettings& t,
                      std::vector<Check>& out) {
  const int port = opt.metrics_port >= 0 ? opt.metrics_port : t.metrics_port;
  if (port < 0) {
    out.push_back(
        {"metrics", "ok", "HOROVOD_METRICS_PORT unset: no endpoint", ""});
    return;
  }
  if (port == 0) {
    out.push_back({"metrics", "ok", "port 0: each rank picks a free port", ""});
    return;
  }
  for (int p = port; p < port + opt.ranks; ++p) {
    const bool v6 = t.metrics_address.find(':') != std::string::npos;
    const int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    int rc = -1;
    if (v6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(static_cast<std::uint16_t>(p));
      inet_pton(AF_INET6, t.metrics_address.c_str(), &a.sin6_addr);
      rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<std::uint16_t>(p));
      inet_pton(AF_INET, t.metrics_address.c_str(), &a.sin_addr);
      rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    const int err = errno;
    close(fd);
    if (rc != 0) {
      out.push_back({"metrics", "FAIL",
                     fmt::format("cannot listen on {}:{}: {}",
                                 t.metrics_address, p, std::strerror(err)),
                     "choose a free HOROVOD_METRICS_PORT (or 0 for any) or "
                     "stop what listens there"});
      return;
    }
  }
  out.push_back({"metrics", "ok",
                 fmt::format("{}:{}..{} free", t.metrics_address, port,
                             port + opt.ranks - 1),
                 ""});
}

// Parses the environment as the runtime would, remembering which variables
// it knows.
void CheckEnvironment(std::vector<Check>& out, TelemetrySettings& telemetry) {
  std::set<std::string> asked;
  const EnvLookup process = ProcessEnv();
  try {
    const RuntimeConfig config =
        ParseConfig([&](std::string_view name) -> std::optional<std::string> {
          asked.insert(std::string(name));
          return process(name);
        });
    telemetry = config.telemetry;
  } catch (const ConfigError& e) {
    out.push_back({"environment", "FAIL", e.what(),
                   "fix or unset that variable (`hvd-tune knobs` lists "
                   "what each knob accepts)"});
    return;
  }
  std::vector<std::string> set, unknown;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (!name.starts_with("HOROVOD_") && !name.starts_with("HVDTUNE_"))
      continue;
    (asked.count(name) ? set : unknown).push_back(name);
  }
  out.push_back(
      {"environment", "ok",
       fmt::format("{} HOROVOD_*/HVDTUNE_* setting(s) parse", set.size()), ""});
  if (!unknown.empty()) {
    std::string names;
    for (const auto& n : unknown) names += " " + n;
    out.push_back({"environment", "warn", "not read by this build:" + names,
                   "a typo? (Horovod's own variables for other features are "
                   "ignored here)"});
  }
}

int RunDoctor(const DoctorOptions& opt) {
  std::vector<Check> checks;
  TelemetrySettings telemetry;
  CheckEnvironment(checks, telemetry);
  CheckMpi(checks);
  CheckGpu(checks);
  CheckStore(opt.db, checks);
  CheckMetricsPort(opt, telemetry, checks);
  const bool failed =
      std::any_of(checks.begin(), checks.end(),
                  [](const Check& c) { return c.status == "FAIL"; });
  if (opt.json) {
    Json rows = Json::array();
    for (const Check& c : checks) {
      rows.push_back({{"check", c.name},
                      {"status", c.status},
                      {"detail", c.detail},
                      {"fix", c.fix}});
    }
    std::cout << Json{{"ok", !failed}, {"checks", rows}}.dump(2) << "\n";
  } else {
    for (const Check& c : checks) {
      fmt::print("[{:^4}] {:<12} {}\n", c.status, c.name, c.detail);
      if (!c.fix.empty()) fmt::print("       {:<12} fix: {}\n", "", c.fix);
    }
    fmt::print("{}\n", failed ? "something is wrong: see FAIL above"
                              : "all checks passed");
  }
  return failed ? kExitFailure : kExitOk;
}

}  // namespace

Command AddDoctorCommand(CLI::App& app) {
  auto opt = std::make_shared<DoctorOptions>();
  auto* sub = app.add_subcommand(
      "doctor",
      "check MPI, the CUDA/NCCL build and GPUs, the config store, the metrics "
      "port and every HOROVOD_*/HVDTUNE_* setting; exit 1 when something is "
      "wrong");
  AddDbOption(*sub, opt->db);
  sub->add_option("--metrics-port", opt->metrics_port,
                  "check this port instead of HOROVOD_METRICS_PORT")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--ranks", opt->ranks,
                  "ranks per node that will listen (port .. port + ranks - 1)")
      ->check(CLI::Range(1, 4096));
  sub->add_flag("--json", opt->json, "JSON instead of text");
  return {sub, [opt] { return RunDoctor(*opt); }};
}

}  // namespace hvdtune::cli
