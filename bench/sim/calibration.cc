#include "calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

namespace hvdtune::sim {
namespace {

constexpr double kKiB = 1024, kMiB = 1024 * 1024;
const char* const kAlgorithms[] = {"native", "ring", "hierarchical"};

// Lone synchronous allreduce calls, us per call (allreduce_bench, float32
// sum, default knobs). One node, 4 ranks: `native` up to 64 MiB from the
// calibration measurements (docs/simulator.md, medians of 5 rounds), ring and
// hierarchical up to 1 MiB measured with it (one run), 4 MiB and up from the
// Allreduce table (a cycle's timer is no floor there: the call outlasts it).
struct Call {
  double bytes;
  double us[3];  // native, ring, hierarchical
};
constexpr Call kOneNode[] = {
    {4 * kKiB, {167, 278, 161}},
    {64 * kKiB, {283, 388, 241}},
    {1 * kMiB, {519, 538, 517}},
    {4 * kMiB, {2919, 3584, 3460}},
    {16 * kMiB, {10964, 12410, 12990}},
    {64 * kMiB, {40195, 44930, 43430}},
    {256 * kMiB, {211610, 176310, 163490}},
};
// Two emulated nodes x 2 ranks (tools/fake_nodes.sh 2 2, TCP across), one
// run after the cycle started on work.
constexpr Call kTwoNodes[] = {
    {64 * kKiB, {513, 466, 436}},       {256 * kKiB, {700, 978, 638}},
    {1 * kMiB, {1278, 1251, 1031}},     {4 * kMiB, {4887, 4661, 4102}},
    {16 * kMiB, {15437, 17953, 17892}}, {64 * kMiB, {71054, 67596, 64139}},
};

// The ring with small segments, one node, 4 ranks (one run, us per call):
// {segment bytes, call bytes, us}.
struct Segmented {
  double segment, bytes, us;
};
constexpr Segmented kSegments[] = {
    {16 * kKiB, 4 * kMiB, 16910},
    {16 * kKiB, 16 * kMiB, 69644},
    {64 * kKiB, 4 * kMiB, 10818},
    {64 * kKiB, 16 * kMiB, 31524},
};

// synthetic_train, 4 ranks, default knobs but the cycle time: the backward
// pass with each layer's gradient enqueued as its compute ends. Means of
// 2 runs: step ms, and rank 0's compute ms in the same runs (the model is
// given that compute, spread by parameters as the bench does, and predicts
// what the cycle loop adds).
struct Train {
  const char* workload;
  double scale;
  double cycle_ms, step_ms, compute_ms;
};
constexpr Train kTrain[] = {
    {"resnet50", 0.1, 0.2, 43.0, 27.3}, {"resnet50", 0.1, 1, 39.0, 20.9},
    {"resnet50", 0.1, 5, 37.9, 24.6},   {"resnet50", 0.1, 20, 36.8, 22.0},
    {"many-small", 1, 0.2, 16.2, 7.50}, {"many-small", 1, 1, 19.8, 8.75},
    {"many-small", 1, 5, 17.7, 8.63},   {"many-small", 1, 20, 28.7, 8.60},
};

// synthetic_train on the emulated cluster, 2 nodes x 2 ranks
// (bench/cluster_calibration.py: default knobs but the allreduce algorithm,
// 5 warm-up and 20 measured steps, medians of 3 interleaved rounds): step
// ms and rank 0's compute ms in the same runs.
struct ClusterTrain {
  const char* link;
  const char* workload;
  double scale;
  const char* algorithm;
  double step_ms, compute_ms;
};
constexpr ClusterTrain kClusterTrain[] = {
    {"1gbe", "resnet50", 0.25, "native", 380.3, 47.3},
    {"1gbe", "resnet50", 0.25, "ring", 379.6, 48.7},
    {"1gbe", "resnet50", 0.25, "hierarchical", 263.5, 49.4},
    {"1gbe", "bert-base", 0.1, "native", 648.1, 85.0},
    {"1gbe", "bert-base", 0.1, "ring", 634.5, 85.5},
    {"1gbe", "bert-base", 0.1, "hierarchical", 436.7, 85.0},
    {"1gbe", "many-small", 1, "native", 61.6, 4.0},
    {"1gbe", "many-small", 1, "ring", 68.5, 7.8},
    {"1gbe", "many-small", 1, "hierarchical", 48.2, 7.8},
    {"10gbe", "resnet50", 0.25, "native", 104.1, 52.8},
    {"10gbe", "resnet50", 0.25, "ring", 119.1, 55.5},
    {"10gbe", "resnet50", 0.25, "hierarchical", 99.7, 55.5},
    {"10gbe", "bert-base", 0.1, "native", 184.2, 98.9},
    {"10gbe", "bert-base", 0.1, "ring", 203.6, 121.6},
    {"10gbe", "bert-base", 0.1, "hierarchical", 166.5, 95.8},
    {"10gbe", "many-small", 1, "native", 20.6, 7.8},
    {"10gbe", "many-small", 1, "ring", 21.6, 7.4},
    {"10gbe", "many-small", 1, "hierarchical", 21.6, 7.8},
};

std::string SizeName(double bytes) {
  return bytes >= kMiB
             ? std::to_string(static_cast<int>(bytes / kMiB)) + " MiB"
             : std::to_string(static_cast<int>(bytes / kKiB)) + " KiB";
}

// A synthetic_train step of `workload` scaled as --scale does (whole
// float32 elements, at least one), predicted by `preset` given the backward
// compute measured in the same runs, spread over the layers by parameters
// as the bench does (the measured compute includes any slowdown). Sets
// `name` to "WORKLOAD xSCALE".
double TrainStepSeconds(const Preset& preset, const Cluster& cluster,
                        const char* workload, double scale, double compute_ms,
                        const KnobSettings& knobs,
                        const std::string& shapes_dir, std::string* name) {
  Workload w = MakeWorkload(workload, shapes_dir);
  for (Gradient& g : w.gradients) {
    g.bytes = std::max<std::int64_t>(
        4, static_cast<std::int64_t>(std::llround(g.bytes * scale / 4)) * 4);
  }
  const double total = static_cast<double>(w.total_bytes());
  for (Gradient& g : w.gradients) {
    g.backward_s = compute_ms * 1e-3 * g.bytes / total;
  }
  w.forward_s = 0;
  Preset p = preset;
  p.compute_scale = 1;
  p.cpu_share = 0;
  char text[64];
  std::snprintf(text, sizeof text, "%s x%g", workload, scale);
  *name = text;
  return SimulateStep(p, cluster, w, knobs).step_s;
}

}  // namespace

std::vector<CalibrationRow> Calibrate(const Preset& shm, const Preset& loopback,
                                      const std::string& shapes_dir) {
  std::vector<CalibrationRow> rows;
  const KnobSettings defaults;
  auto single = [&](const char* bench, const Preset& p, Cluster c,
                    const Call& call, int a) {
    KnobSettings k = defaults;
    k.Set(KnobId::kAllreduceAlgorithm, a);
    rows.push_back({bench, SizeName(call.bytes), kAlgorithms[a],
                    call.us[a] * 1e-6, SingleCallSeconds(p, c, k, call.bytes)});
  };
  for (const Call& b : kOneNode) {
    for (int a = 0; a < 3; ++a) single("allreduce 1x4", shm, {1, 4}, b, a);
  }
  for (const Call& b : kTwoNodes) {
    for (int a = 0; a < 3; ++a) single("allreduce 2x2", loopback, {2, 2}, b, a);
  }
  for (const Segmented& g : kSegments) {
    KnobSettings k = defaults;
    k.Set(KnobId::kAllreduceAlgorithm, 1);
    k.Set(KnobId::kRingSegmentBytes, g.segment);
    rows.push_back({"allreduce 1x4, segment " + SizeName(g.segment),
                    SizeName(g.bytes), "ring", g.us * 1e-6,
                    SingleCallSeconds(shm, {1, 4}, k, g.bytes)});
  }
  // fusion_bench: every gradient enqueued at once, then waited for; no
  // compute. Fused (default threshold): the calibration measurements; unfused
  // (threshold 0): one run of fusion_bench after the change.
  struct Fusion {
    const char* workload;
    double fused_ms, unfused_ms;
  };
  for (const Fusion& f :
       {Fusion{"resnet50", 71.4, 66.8}, Fusion{"many-small", 6.43, 98.0}}) {
    Workload w = MakeWorkload(f.workload, shapes_dir);
    for (Gradient& g : w.gradients) g.backward_s = 0;
    w.forward_s = 0;
    KnobSettings k = defaults;
    rows.push_back({"fusion step", f.workload, "fused", f.fused_ms * 1e-3,
                    SimulateStep(shm, {1, 4}, w, k).step_s});
    k.Set(KnobId::kFusionThreshold, 0);
    rows.push_back({"fusion step", f.workload, "unfused", f.unfused_ms * 1e-3,
                    SimulateStep(shm, {1, 4}, w, k).step_s});
  }
  // negotiation_bench: us per active cycle; cache on from the calibration
  // Latency table, cache off from one run after the change.
  struct Negotiation {
    int tensors;
    double on_us, off_us;
  };
  for (const Negotiation& n :
       {Negotiation{161, 408, 776}, Negotiation{1000, 550, 2646}}) {
    const std::string t = std::to_string(n.tensors) + " tensors";
    rows.push_back({"negotiation", t, "cache on", n.on_us * 1e-6,
                    NegotiationSeconds(shm, {1, 4}, n.tensors, true)});
    rows.push_back({"negotiation", t, "cache off", n.off_us * 1e-6,
                    NegotiationSeconds(shm, {1, 4}, n.tensors, false)});
  }
  for (const Train& t : kTrain) {
    KnobSettings k = defaults;
    k.Set(KnobId::kCycleTime, t.cycle_ms);
    std::string name;
    const double predicted = TrainStepSeconds(
        shm, {1, 4}, t.workload, t.scale, t.compute_ms, k, shapes_dir, &name);
    char algo[32];
    std::snprintf(algo, sizeof algo, "cycle %g ms", t.cycle_ms);
    rows.push_back(
        {"synthetic_train", name, algo, t.step_ms * 1e-3, predicted});
  }
  return rows;
}

namespace {

// Log-space coordinate search: each parameter multiplied by exp(+-step),
// kept where `loss` falls, the step shrinking from 1 to 0.01.
template <typename Loss>
void CoordinateSearch(const std::vector<double*>& params, Loss loss) {
  double best = loss();
  for (double step = 1.0; step > 0.01; step *= 0.6) {
    for (bool improved = true; improved;) {
      improved = false;
      for (double* p : params) {
        for (double dir : {-1.0, 1.0}) {
          const double old = *p;
          *p = old * std::exp(dir * step);
          const double l = loss();
          if (l < best) {
            best = l;
            improved = true;
          } else {
            *p = old;
          }
        }
      }
    }
  }
}

}  // namespace

double MeanSquaredLogError(const std::vector<CalibrationRow>& rows) {
  double sum = 0;
  for (const CalibrationRow& r : rows) {
    const double e = std::log(r.predicted_s / r.measured_s);
    sum += e * e;
  }
  return sum / static_cast<double>(rows.size());
}

void FitPresets(Preset& shm, Preset& loopback, const std::string& shapes_dir) {
  // The fitted constants; the loopback preset shares the host constants.
  // reduce_bw is not fitted: with the reduction and the transfer in
  // one max() the two trade off, and the search drives reduce_bw to
  // infinity; it keeps the wave-1 fit's 4.26 GB/s.
  const std::vector<double*> params = {
      &shm.intra_alpha, &shm.intra_bw,         &shm.copy_bw,      &shm.call_s,
      &shm.segment_s,   &shm.cycle_s,          &shm.tensor_s,     &shm.cached_s,
      &shm.request_s,   &loopback.inter_alpha, &loopback.inter_bw};
  CoordinateSearch(params, [&] {
    Preset lb = shm;
    lb.name = loopback.name;
    lb.inter_alpha = loopback.inter_alpha;
    lb.inter_bw = loopback.inter_bw;
    return MeanSquaredLogError(Calibrate(shm, lb, shapes_dir));
  });
  const double inter_alpha = loopback.inter_alpha, inter_bw = loopback.inter_bw;
  const std::string name = loopback.name, description = loopback.description;
  loopback = shm;
  loopback.name = name;
  loopback.description = description;
  loopback.inter_alpha = inter_alpha;
  loopback.inter_bw = inter_bw;
}

namespace {

// The distinct values of one field of the cluster table, in table order.
std::vector<std::string> Distinct(const char* ClusterTrain::*field) {
  std::vector<std::string> values;
  for (const ClusterTrain& t : kClusterTrain) {
    if (std::find(values.begin(), values.end(), t.*field) == values.end()) {
      values.emplace_back(t.*field);
    }
  }
  return values;
}

}  // namespace

std::vector<std::string> EmulatedLinks() {
  return Distinct(&ClusterTrain::link);
}

std::string EmulatedPresetName(const std::string& link) {
  return "emulated-" + link;
}

namespace {

// The rows of `link` whose workload is (`keep` true) or is not (false)
// `workload`; every row of `link` when `workload` is empty.
std::vector<CalibrationRow> ClusterRows(const Preset& preset,
                                        const std::string& link,
                                        const std::string& shapes_dir,
                                        const std::string& workload = "",
                                        bool keep = true) {
  std::vector<CalibrationRow> rows;
  for (const ClusterTrain& t : kClusterTrain) {
    if (link != t.link) continue;
    if (!workload.empty() && (workload == t.workload) != keep) continue;
    KnobSettings k;
    k.Set(
        KnobId::kAllreduceAlgorithm,
        ParseKnobValue(GetKnobSpec(KnobId::kAllreduceAlgorithm), t.algorithm));
    std::string name;
    const double predicted =
        TrainStepSeconds(preset, {2, 2}, t.workload, t.scale, t.compute_ms, k,
                         shapes_dir, &name);
    rows.push_back({"synthetic_train 2x2 " + link, name, t.algorithm,
                    t.step_ms * 1e-3, predicted});
  }
  return rows;
}

// FitLink on the rows ClusterRows(..., workload, keep) selects.
void FitLinkOn(Preset& preset, const std::string& link,
               const std::string& shapes_dir, const std::string& workload,
               bool keep) {
  // A constant at 0 never moves in a multiplicative search: start the
  // per-tensor cost from one node's.
  if (!(preset.tensor_s > 0)) preset.tensor_s = FindPreset("cpu-shm").tensor_s;
  CoordinateSearch({&preset.inter_bw, &preset.segment_s, &preset.tensor_s},
                   [&] {
                     return MeanSquaredLogError(
                         ClusterRows(preset, link, shapes_dir, workload, keep));
                   });
}

}  // namespace

std::vector<CalibrationRow> CalibrateCluster(const Preset& preset,
                                             const std::string& link,
                                             const std::string& shapes_dir) {
  return ClusterRows(preset, link, shapes_dir);
}

void FitLink(Preset& preset, const std::string& link,
             const std::string& shapes_dir) {
  FitLinkOn(preset, link, shapes_dir, "", true);
}

double NominalLinkBandwidth(const std::string& link) {
  if (link == "1gbe") return 1e9 / 8;
  if (link == "10gbe") return 10e9 / 8;
  throw std::invalid_argument("no nominal rate for link '" + link + "'");
}

Preset UnfittedLinkPreset(const std::string& link) {
  Preset p = FindPreset("cpu-shm");
  p.name = EmulatedPresetName(link);
  p.inter_alpha = FindPreset("cpu-loopback").inter_alpha;
  p.inter_bw = NominalLinkBandwidth(link);
  return p;
}

std::vector<std::string> EmulatedWorkloads() {
  return Distinct(&ClusterTrain::workload);
}

std::vector<CalibrationRow> HeldOutWorkloads(const std::string& link,
                                             const std::string& shapes_dir) {
  std::vector<CalibrationRow> rows;
  for (const std::string& w : EmulatedWorkloads()) {
    Preset fit = UnfittedLinkPreset(link);
    FitLinkOn(fit, link, shapes_dir, w, /*keep=*/false);
    for (CalibrationRow& r : ClusterRows(fit, link, shapes_dir, w, true)) {
      r.bench = "fit without " + w;
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::vector<CalibrationRow> HeldOutLink(const std::string& fit_link,
                                        const std::string& predict_link,
                                        const std::string& shapes_dir) {
  Preset fit = UnfittedLinkPreset(fit_link);
  FitLink(fit, fit_link, shapes_dir);
  Preset carried = UnfittedLinkPreset(predict_link);
  carried.segment_s = fit.segment_s;
  carried.tensor_s = fit.tensor_s;
  std::vector<CalibrationRow> rows =
      ClusterRows(carried, predict_link, shapes_dir);
  for (CalibrationRow& r : rows) r.bench = "fit on " + fit_link;
  return rows;
}

ErrorSummary SummariseErrors(const std::vector<CalibrationRow>& rows) {
  ErrorSummary s;
  std::vector<double> errors;
  for (const CalibrationRow& r : rows) {
    errors.push_back(std::abs(r.error()));
    s.within_25 += errors.back() <= 0.25;
  }
  s.rows = rows.size();
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  const std::size_t n = errors.size();
  s.median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  s.max = errors.back();
  return s;
}

}  // namespace hvdtune::sim
