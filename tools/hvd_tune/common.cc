#include "common.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

namespace hvdtune::cli {

int LauncherRank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  }
  return 0;
}

bool StdoutIsTerminal() {
  if (isatty(STDOUT_FILENO) != 1) return false;
  if (std::getenv("OMPI_COMM_WORLD_RANK") == nullptr) return true;
  std::error_code ec;
  const std::string target =
      std::filesystem::read_symlink(
          "/proc/" + std::to_string(getppid()) + "/fd/1", ec)
          .string();
  return !ec &&
         (target.starts_with("/dev/pts/") || target.starts_with("/dev/tty"));
}

void AddDbOption(CLI::App& app, std::string& path) {
  app.add_option("--db", path,
                 "config store file (default: $HOROVOD_AUTOTUNE_DB, else "
                 "$XDG_STATE_HOME/hvdtune/store.db or "
                 "~/.local/state/hvdtune/store.db)");
}

std::string ResolveStorePath(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* v = std::getenv("HOROVOD_AUTOTUNE_DB"); v && *v) return v;
  const std::string path = store::DefaultStorePath();
  if (path.empty()) {
    throw UsageError(
        "--db: no store given and neither HOROVOD_AUTOTUNE_DB, "
        "XDG_STATE_HOME nor HOME is set");
  }
  return path;
}

std::unique_ptr<store::Store> OpenStoreForReading(const std::string& path) {
  if (!store::IsServerLocation(path) && !std::filesystem::exists(path)) {
    throw Failure("config store " + path +
                  ": no such file (run `hvd-tune sweep` or an autotuned job "
                  "first, or give --db)");
  }
  try {
    store::StoreOptions options{path};
    options.read_only = true;
    return std::make_unique<store::Store>(options);
  } catch (const store::StoreError& e) {
    throw Failure(e.what());
  }
}

std::string PrintableFingerprint(const store::PairSummary& pair) {
  return store::PrintableFingerprint(pair.hardware_fp, pair.model_fp);
}

store::PairSummary FindPair(store::Store& db, const std::string& fingerprint) {
  std::vector<store::PairSummary> found;
  for (store::PairSummary& p : db.ListPairs()) {
    if (PrintableFingerprint(p).starts_with(fingerprint)) {
      found.push_back(std::move(p));
    }
  }
  if (found.empty()) {
    throw Failure("fingerprint '" + fingerprint + "': not in config store " +
                  db.path() + " (`hvd-tune show` lists what it has)");
  }
  if (found.size() > 1) {
    std::string all;
    for (const auto& p : found) all += " " + PrintableFingerprint(p);
    throw UsageError("fingerprint '" + fingerprint +
                     "': ambiguous prefix, it matches" + all);
  }
  return found.front();
}

Json KnobJson(const KnobSpec& spec, double value) {
  switch (spec.type) {
    case KnobType::kInteger:
      return static_cast<std::int64_t>(value);
    case KnobType::kBool:
      return value != 0;
    case KnobType::kFloat:
      return value;
    case KnobType::kCategorical:
      return std::get<std::string>(ToStoredValue(spec, value));
  }
  return value;
}

Json KnobsJson(const KnobSettings& values) {
  Json out = Json::object();
  for (const KnobSpec& spec : KnobTable()) {
    out[std::string(spec.name)] = KnobJson(spec, values.Get(spec.id));
  }
  return out;
}

Json StoredJson(const store::KnobValues& values) {
  // The knob table's order first, then names this build does not know
  // (kept with their stored type).
  Json out = Json::object();
  for (const KnobSpec& spec : KnobTable()) {
    const auto it = values.find(std::string(spec.name));
    if (it == values.end()) continue;
    if (auto v = FromStoredValue(spec, it->second, nullptr)) {
      out[it->first] = KnobJson(spec, *v);
    } else {
      std::visit([&](const auto& raw) { out[it->first] = raw; }, it->second);
    }
  }
  for (const auto& entry : values) {
    if (FindKnob(entry.first)) continue;
    std::visit([&](const auto& raw) { out[entry.first] = raw; }, entry.second);
  }
  return out;
}

std::string EnvText(const KnobSpec& spec, double value) {
  switch (spec.type) {
    case KnobType::kInteger:
      return std::to_string(static_cast<std::int64_t>(value));
    case KnobType::kBool:
      return value != 0 ? "1" : "0";
    case KnobType::kFloat:
      return ExactNumber(value);
    case KnobType::kCategorical:
      return std::get<std::string>(ToStoredValue(spec, value));
  }
  return ExactNumber(value);
}

std::string FormatTime(double seconds) {
  if (seconds <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string ExactNumber(double value) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, r.ptr);
}

std::string FormatRate(double bytes_per_second) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f GB/s", bytes_per_second / 1e9);
  return buf;
}

}  // namespace hvdtune::cli
