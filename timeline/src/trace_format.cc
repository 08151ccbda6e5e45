#include "trace_format.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace hvdtune::timeline::internal {
namespace {

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";  // JSON has no NaN
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string EstimateJson(const ScoreEstimate& e) {
  return "{\"mean\":" + Number(e.mean) + ",\"low\":" + Number(e.low) +
         ",\"high\":" + Number(e.high) + "}";
}

// A freeze's estimates: the model's, with 95% intervals.
std::string EstimateArgs(const Record& r) {
  return ",\"estimate_bytes_per_second\":" + EstimateJson(r.estimate) +
         ",\"initial_estimate_bytes_per_second\":" + EstimateJson(r.reference) +
         ",\"gain\":" + EstimateJson(r.gain) +
         ",\"kept_initial\":" + (r.kept_initial ? "true" : "false");
}

// Horovod's activity names: NEGOTIATE_ALLREDUCE, MPI_ALLREDUCE, ...
std::string Upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(c));
  return u;
}

std::string KnobArgs(const KnobSettings& v) {
  std::string s;
  for (const KnobSpec& spec : KnobTable()) {
    s += ",";
    s += JsonString(spec.name);
    s += ":";
    s += JsonString(v.FormatValue(spec.id));
  }
  return s;
}

// The runtime clock at trace time 0, in the header's arguments.
constexpr std::string_view kClockOrigin = "hvdtune_clock_origin";

}  // namespace

std::optional<double> TraceFormatter::ReadClockOrigin(const std::string& head) {
  const std::string key = "\"" + std::string(kClockOrigin) + "\":";
  const auto at = head.find(key);
  if (at == std::string::npos) return std::nullopt;
  const char* begin = head.c_str() + at + key.size();
  char* end = nullptr;
  const double t0 = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(t0)) return std::nullopt;
  return t0;
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

void TraceFormatter::AppendHeader(std::string& out) {
  char origin[64];
  std::snprintf(origin, sizeof origin, "%.6f", t0_);
  out +=
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":"
      "\"hvdtune: knobs, autotune, cycles\",\"" +
      std::string(kClockOrigin) + "\":" + origin + "}}";
  out +=
      ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":0,\"args\":{"
      "\"sort_index\":0}}";
}

int TraceFormatter::Row(const std::string& name, std::string& out) {
  const auto [it, added] =
      rows_.emplace(name, static_cast<int>(rows_.size()) + 1);
  if (added) {
    const std::string pid = std::to_string(it->second);
    out += ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid +
           ",\"args\":{\"name\":" + JsonString(name) + "}}";
    out += ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + pid +
           ",\"args\":{\"sort_index\":" + pid + "}}";
  }
  return it->second;
}

void TraceFormatter::Span(std::string& out, const char* name, int row,
                          double from, double to, const std::string& args) {
  if (to < from) to = from;
  out += ",\n{\"name\":\"";
  out += name;
  out += "\",\"ph\":\"X\",\"pid\":" + std::to_string(row) +
         ",\"tid\":0,\"ts\":" + Number((from - t0_) * 1e6) +
         ",\"dur\":" + Number((to - from) * 1e6);
  if (!args.empty()) out += ",\"args\":{" + args + "}";
  out += "}";
}

void TraceFormatter::Instant(std::string& out, const std::string& name,
                             double at, const std::string& args) {
  // Events stamped before the runtime started (or not stamped) go at 0.
  if (at < t0_) at = t0_;
  out += ",\n{\"name\":" + JsonString(name) +
         ",\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":" +
         Number((at - t0_) * 1e6) + ",\"args\":{" + args + "}}";
}

void TraceFormatter::Append(const Record& r, std::string& out) {
  using K = Record::Kind;
  switch (r.kind) {
    case K::kTensor: {
      const int row = Row(r.name, out);
      const std::string op = Upper(CollectiveTypeName(r.op));
      const std::string args =
          "\"dtype\":" + JsonString(DataTypeName(r.dtype)) +
          ",\"bytes\":" + std::to_string(r.bytes) +
          ",\"fused_with\":" + std::to_string(r.fused_with) +
          ",\"ok\":" + (r.status == StatusCode::kOk ? "true" : "false") +
          ",\"status_code\":" + std::to_string(static_cast<int>(r.status));
      Span(out, ("NEGOTIATE_" + op).c_str(), row, r.t[0], r.t[1], "");
      Span(out, op.c_str(), row, r.t[1], r.t[5], args);
      Span(out, "QUEUE", row, r.t[1], r.t[2], "");
      if (r.t[3] > r.t[2]) {
        Span(out, "MEMCPY_IN_FUSION_BUFFER", row, r.t[2], r.t[3], "");
      }
      Span(out, ("MPI_" + op).c_str(), row, r.t[3], r.t[4], "");
      if (r.t[5] > r.t[4]) {
        Span(out, "MEMCPY_OUT_FUSION_BUFFER", row, r.t[4], r.t[5], "");
      }
      return;
    }
    case K::kCycle:
      Instant(out, "CYCLE_START", r.t[0],
              "\"cycle\":" + std::to_string(r.number));
      return;
    case K::kKnobs:
      Instant(out, "KNOBS_APPLIED", r.t[0],
              "\"version\":" + std::to_string(r.number) + ",\"before\":" +
                  JsonString(r.previous.ToString()) + KnobArgs(r.values));
      return;
    case K::kSample:
      Instant(out, "AUTOTUNE_SAMPLE", r.t[0],
              "\"index\":" + std::to_string(r.number) +
                  ",\"phase\":" + JsonString(AutotunePhaseName(r.to)) +
                  ",\"score_bytes_per_second\":" + Number(r.score) +
                  ",\"best_score_bytes_per_second\":" + Number(r.best_score) +
                  KnobArgs(r.values));
      return;
    case K::kPhase:
      Instant(
          out, "AUTOTUNE_" + Upper(AutotunePhaseName(r.to)), r.t[0],
          "\"from\":" + JsonString(AutotunePhaseName(r.from)) +
              ",\"to\":" + JsonString(AutotunePhaseName(r.to)) +
              ",\"samples\":" + std::to_string(r.number) +
              ",\"score_bytes_per_second\":" + Number(r.score) +
              ",\"reference_score_bytes_per_second\":" + Number(r.best_score) +
              (r.to == AutotunePhase::kFrozen ? EstimateArgs(r) : "") +
              KnobArgs(r.values));
      return;
    case K::kError:
      Instant(out, "ERROR", r.t[0],
              "\"kind\":" +
                  JsonString(
                      ErrorKindName(static_cast<ErrorEvent::Kind>(r.number))) +
                  ",\"tensor\":" + JsonString(r.name) +
                  ",\"message\":" + JsonString(r.text));
      return;
    case K::kStall:
      Instant(out, "STALL", r.t[0],
              "\"tensor\":" + JsonString(r.name) +
                  ",\"missing_ranks\":" + JsonString(r.text) +
                  ",\"shutdown\":" + (r.number ? "true" : "false"));
      return;
    case K::kWorld:
      // An elastic job's world began (after a reset, or the first).
      Instant(out, "ELASTIC_WORLD", r.t[0],
              "\"world\":" + std::to_string(r.number) + ",\"size\":" +
                  std::to_string(r.bytes) + ",\"cause\":" + JsonString(r.name) +
                  ",\"resets\":" + JsonString(r.text));
      return;
    case K::kStoreLookup:
      Instant(out, "STORE_LOOKUP", r.t[0],
              "\"result\":" +
                  JsonString(StoreLookupResultName(
                      static_cast<StoreLookupEvent::Result>(r.number))) +
                  ",\"fingerprint\":" + JsonString(r.name));
      return;
  }
}

}  // namespace hvdtune::timeline::internal
