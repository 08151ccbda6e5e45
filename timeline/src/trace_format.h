// One buffered timeline event and its Chrome-trace JSON form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "hvdtune/events.h"

namespace hvdtune::timeline::internal {

/// A copy of one event. Slots are reused: `name` and `text` keep their
/// capacity, so after the first events nothing is allocated.
struct Record {
  enum class Kind : std::uint8_t {
    kTensor,
    kCycle,
    kKnobs,
    kSample,
    kPhase,
    kError,
    kStall,
    kStoreLookup,
    kWorld
  };
  Kind kind = Kind::kTensor;
  /// Tensor name (kTensor, kError, kStall); fingerprint (kStoreLookup).
  std::string name;
  /// Error message; a stall's missing ranks.
  std::string text;
  CollectiveType op = CollectiveType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  StatusCode status = StatusCode::kOk;
  int fused_with = 1;
  std::int64_t bytes = 0;
  /// kTensor: enqueued, negotiated, started, collective_started,
  /// collective_finished, finished. Others: t[0] is the time.
  double t[6] = {};
  /// kKnobs: version; kSample: index; kPhase: samples; kCycle: cycle;
  /// kError: kind; kStall: shutdown; kStoreLookup: result; kWorld: the
  /// elastic world's version (its cause in `name`, its resets in `text`,
  /// its size in `bytes`).
  std::uint64_t number = 0;
  AutotunePhase from = AutotunePhase::kOff, to = AutotunePhase::kOff;
  double score = 0, best_score = 0;
  /// kPhase to frozen: the model's estimates (mean, low, high) of the
  /// frozen configuration, of the initial one and of the gain.
  ScoreEstimate estimate, reference, gain;
  bool kept_initial = false;
  KnobSettings values;
  KnobSettings previous;
};

/// Turns records into trace events, assigning each tensor its row.
class TraceFormatter {
 public:
  /// `t0`: the runtime clock at start (trace time 0).
  explicit TraceFormatter(double t0) : t0_(t0) {}
  /// Appends the events of `r` (and, for a tensor seen the first time, its
  /// row's name) to `out`, each preceded by ",\n".
  void Append(const Record& r, std::string& out);
  /// The metadata naming row 0 (knob changes, autotune, cycles); it
  /// carries t0 (ReadClockOrigin), so that a later runtime of an elastic
  /// job continues the trace on the same time axis.
  void AppendHeader(std::string& out);
  /// The t0 that AppendHeader wrote at the start of `head`, if any.
  static std::optional<double> ReadClockOrigin(const std::string& head);

 private:
  int Row(const std::string& name, std::string& out);
  void Span(std::string& out, const char* name, int row, double from, double to,
            const std::string& args);
  void Instant(std::string& out, const std::string& name, double at,
               const std::string& args);
  double t0_;
  std::unordered_map<std::string, int> rows_;
};

/// `s` as a JSON string literal (quoted, escaped).
std::string JsonString(std::string_view s);

}  // namespace hvdtune::timeline::internal
