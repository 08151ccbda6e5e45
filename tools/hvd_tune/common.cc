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
  if (!std::filesystem::exists(path)) {
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

store::KnobValue ToStoredValue(const KnobSpec& spec, double value) {
  switch (spec.type) {
    case KnobType::kInteger:
    case KnobType::kBool:
      return static_cast<std::int64_t>(value);
    case KnobType::kFloat:
      return value;
    case KnobType::kCategorical: {
      const auto i = static_cast<std::size_t>(value);
      return i < spec.choices.size() ? std::string(spec.choices[i])
                                     : std::to_string(i);
    }
  }
  return value;
}

std::optional<double> FromStoredValue(const KnobSpec& spec,
                                      const store::KnobValue& value,
                                      std::string* why) {
  auto fail = [&](const std::string& text) -> std::optional<double> {
    if (why) *why = text;
    return std::nullopt;
  };
  double v = 0;
  if (spec.type == KnobType::kCategorical) {
    const auto* s = std::get_if<std::string>(&value);
    if (!s) return fail("expected one of the choices as text");
    for (std::size_t i = 0; i < spec.choices.size(); ++i) {
      if (spec.choices[i] == *s) return static_cast<double>(i);
    }
    std::string allowed;
    for (auto c : spec.choices)
      allowed += (allowed.empty() ? "" : ", ") + std::string(c);
    return fail("unknown choice '" + *s + "' (expected one of " + allowed +
                ")");
  }
  if (const auto* i = std::get_if<std::int64_t>(&value)) {
    v = static_cast<double>(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    if (spec.type != KnobType::kFloat) return fail("expected an integer");
    v = *d;
  } else {
    return fail("expected a number");
  }
  if (spec.type == KnobType::kBool && v != 0 && v != 1) {
    return fail("expected 0 or 1");
  }
  const bool below =
      spec.type == KnobType::kFloat ? v <= spec.min_value : v < spec.min_value;
  if (!std::isfinite(v) || below || v > spec.max_value) {
    return fail(ExactNumber(v) + " is outside " +
                (spec.type == KnobType::kFloat ? "(" : "[") +
                ExactNumber(spec.min_value) + ", " +
                ExactNumber(spec.max_value) + "]");
  }
  return v;
}

store::KnobValues ToStored(const KnobSettings& values) {
  store::KnobValues out;
  for (const KnobSpec& spec : KnobTable()) {
    out[std::string(spec.name)] = ToStoredValue(spec, values.Get(spec.id));
  }
  return out;
}

std::optional<KnobSettings> FromStored(const store::KnobValues& values,
                                       const KnobSettings& base) {
  KnobSettings k = base;
  for (const auto& [name, value] : values) {
    const auto id = FindKnob(name);
    if (!id) continue;
    const auto v = FromStoredValue(GetKnobSpec(*id), value, nullptr);
    if (!v) return std::nullopt;
    k.Set(*id, *v);
  }
  return k;
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
