// hvdtune._core's view of tuning: the autotuner's status, the knobs, the
// runtime's statistics, the timeline and step marks.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "bindings.h"
#include "errors.h"
#include "hvdtune/runtime.h"
#include "state.h"

namespace py = pybind11;

namespace hvdtune::python {
namespace {

py::dict KnobsDict(const KnobSettings& values) {
  py::dict d;
  for (const KnobSpec& spec : KnobTable()) {
    d[py::str(std::string(spec.name))] = values.FormatValue(spec.id);
  }
  return d;
}

py::dict AutotuneStatusDict() {
  const AutotuneStatus st = Rt().autotune_status();
  py::dict d;
  d["phase"] = std::string(AutotunePhaseName(st.phase));
  d["samples"] = st.samples;
  d["default_score"] = st.default_score;
  d["best_score"] = st.best_score;
  d["best"] = KnobsDict(st.best);
  // The model's estimates once frozen (NaN where unknown).
  auto estimate = [](const ScoreEstimate& e) {
    py::dict x;
    x["mean"] = e.mean;
    x["low"] = e.low;
    x["high"] = e.high;
    x["samples"] = e.samples;
    return x;
  };
  d["best_estimate"] = estimate(st.best_estimate);
  d["default_estimate"] = estimate(st.default_estimate);
  d["gain"] = estimate(st.gain);
  d["kept_initial"] = st.kept_initial;
  d["tuned_knobs"] = st.tuned_knobs;
  d["source"] = st.source;
  d["fingerprint"] = st.fingerprint;
  return d;
}

py::dict StatsDict() {
  const RuntimeStats st = Rt().stats();
  py::dict d;
  d["cycles"] = st.cycles;
  d["active_cycles"] = st.active_cycles;
  d["negotiation_seconds"] = st.negotiation_seconds;
  d["cache_hits"] = st.cache_hits;
  d["cache_misses"] = st.cache_misses;
  d["tensors_completed"] = st.tensors_completed;
  d["collective_calls"] = st.collective_calls;
  d["bytes_allreduced"] = st.bytes_allreduced;
  d["knob_version"] = st.knob_version;
  d["autotune_seconds"] = st.autotune_seconds;
  return d;
}

}  // namespace

void BindTuning(py::module_& m) {
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        RaiseStatus(Rt().StartTimeline(path, mark_cycles));
      },
      py::arg("path"), py::arg("mark_cycles") = false,
      "Starts writing the timeline to `path` (rank 0 writes).");
  m.def(
      "stop_timeline", [] { RaiseStatus(Rt().StopTimeline()); },
      "Stops and closes the timeline being written.");
  m.def("mark_step", [] { Rt().MarkStep(); });
  m.def("autotune_status", &AutotuneStatusDict);
  m.def("knobs", [] { return KnobsDict(Rt().knobs()); });
  m.def("stats", &StatsDict);
}

}  // namespace hvdtune::python
