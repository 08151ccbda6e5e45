#include "root/sinks/autotune_log.h"

#include <cmath>
#include <iomanip>
#include <iostream>

namespace hvdtune::internal {

AutotuneLogSink::AutotuneLogSink(std::string path) : path_(std::move(path)) {}

std::string AutotuneLogSink::Header() {
  std::string h;
  for (const KnobSpec& spec : KnobTable()) {
    if (spec.horovod_log.value) h += std::string(spec.horovod_log.name) + ',';
  }
  h += "score,sample,phase,timestamp";
  for (const KnobSpec& spec : KnobTable()) h += "," + std::string(spec.name);
  h += ",sample_steps,sample_seconds,sample_precision";
  return h;
}

void AutotuneLogSink::OnStart(const RuntimeInfo& info) {
  if (info.rank != 0) return;  // only rank 0 tunes
  out_.open(path_, std::ios::out | std::ios::trunc);
  if (!out_) {
    std::cerr << "[hvdtune] WARNING: cannot write the autotune log " << path_
              << "; tuning goes on without it" << std::endl;
    return;
  }
  out_ << Header() << '\n';
  out_.flush();
}

void AutotuneLogSink::OnAutotuneSample(const AutotuneSampleEvent& e) {
  if (!out_) return;
  if (start_ < 0) start_ = e.time;
  for (const KnobSpec& spec : KnobTable()) {
    if (spec.horovod_log.value) {
      out_ << spec.horovod_log.value(e.values.Get(spec.id)) << ',';
    }
  }
  out_ << e.score << ',' << e.index << ',' << AutotunePhaseName(e.phase) << ','
       << std::fixed << std::setprecision(6) << e.time - start_
       << std::defaultfloat;
  for (const KnobSpec& spec : KnobTable()) {
    out_ << ',' << e.values.FormatValue(spec.id);
  }
  // An empty precision: a sample of one step has none.
  out_ << ',' << e.steps << ',' << std::fixed << std::setprecision(6)
       << e.seconds << std::defaultfloat << ',';
  if (std::isfinite(e.precision)) out_ << e.precision;
  out_ << '\n';
  out_.flush();
}

}  // namespace hvdtune::internal
