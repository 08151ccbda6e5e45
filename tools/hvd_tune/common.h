// What every hvd-tune subcommand shares: the two error kinds behind the exit
// codes, the config store's location, and knob values in their three forms
// (the knob table's double, the store's typed value, JSON / environment
// text).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hvdtune/knobs.h"
#include "hvdtune/store/store.h"
#include "hvdtune/store_mapping.h"

namespace hvdtune::cli {

using Json = nlohmann::ordered_json;

/// Exit status 2: a bad command line. The message names the argument.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// Exit status 1: the command could not do its job. The message names the
/// file or the thing at fault.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

/// A subcommand: its CLI11 app and what runs it once parsed.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// This process's rank under mpirun (from the launcher's environment), 0
/// when not launched by mpirun. Only rank 0 prints errors.
int LauncherRank();

/// Whether stdout reaches a terminal. Under mpirun every rank's stdout is a
/// pseudo-terminal of the launcher's, so there it is the launcher's (the
/// parent process's) stdout that counts.
bool StdoutIsTerminal();

/// --db on `app`, into `path`.
void AddDbOption(CLI::App& app, std::string& path);
/// `flag_value` when given, else HOROVOD_AUTOTUNE_DB, else the per-user
/// default (the runtime's own rule).
std::string ResolveStorePath(const std::string& flag_value);
/// Opens an existing store read-only; Failure naming the file otherwise.
std::unique_ptr<store::Store> OpenStoreForReading(const std::string& path);

/// A pair of the store found by its printable fingerprint
/// ("hhhh-mmmm") or an unambiguous prefix of it. Failure otherwise.
store::PairSummary FindPair(store::Store& db, const std::string& fingerprint);
std::string PrintableFingerprint(const store::PairSummary& pair);

// The knob <-> stored value mapping (ToStoredValue, FromStoredValue,
// ToStored, FromStored) is the runtime's: hvdtune/store_mapping.h.

/// A knob value as its JSON type: integer, number, bool, or choice name.
Json KnobJson(const KnobSpec& spec, double value);
/// Every knob, by name.
Json KnobsJson(const KnobSettings& values);
/// Stored values as JSON by knob type (unknown names keep the stored type).
Json StoredJson(const store::KnobValues& values);
/// The text a knob's environment variable takes for `value` (parses back to
/// exactly `value`).
std::string EnvText(const KnobSpec& spec, double value);

/// "2026-11-22 23:40" (UTC) for seconds since the epoch; "-" for 0.
std::string FormatTime(double seconds);
/// Shortest text that reads back as the same double.
std::string ExactNumber(double value);
/// "1.23 GB/s" for bytes per second.
std::string FormatRate(double bytes_per_second);

}  // namespace hvdtune::cli
