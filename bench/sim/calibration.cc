#include "calibration.h"

#include <cmath>
#include <cstdint>

namespace hvdtune::sim {
namespace {

constexpr double kKiB = 1024, kMiB = 1024 * 1024;
const char* const kAlgorithms[] = {"native", "ring", "hierarchical"};

// busbw (GB/s) from README "Allreduce": 4 ranks, one node.
struct Busbw {
  double bytes;
  double gbps[3];  // native, ring, hierarchical
};
constexpr Busbw kOneNode[] = {
    {4 * kKiB, {0.006, 0.005, 0.005}},   {64 * kKiB, {0.089, 0.090, 0.090}},
    {1 * kMiB, {1.445, 1.401, 1.422}},   {4 * kMiB, {1.739, 1.755, 1.818}},
    {16 * kMiB, {1.981, 2.028, 1.937}},  {64 * kMiB, {2.234, 2.241, 2.318}},
    {256 * kMiB, {1.903, 2.284, 2.463}},
};
// Two emulated nodes x 2 ranks (TCP across).
constexpr Busbw kTwoNodes[] = {
    {64 * kKiB, {0.042, 0.049, 0.035}}, {256 * kKiB, {0.363, 0.349, 0.356}},
    {1 * kMiB, {1.430, 0.722, 1.454}},  {4 * kMiB, {1.578, 1.461, 1.554}},
    {16 * kMiB, {1.449, 1.351, 1.573}}, {64 * kMiB, {1.645, 1.569, 2.001}},
};

}  // namespace

std::vector<CalibrationRow> Calibrate(const Preset& shm, const Preset& loopback,
                                      const std::string& shapes_dir) {
  std::vector<CalibrationRow> rows;
  const KnobSettings defaults;
  auto single = [&](const char* bench, const Preset& p, Cluster c,
                    const Busbw& b, int a) {
    KnobSettings k = defaults;
    k.Set(KnobId::kAllreduceAlgorithm, a);
    const double factor = 2.0 * (c.world() - 1) / c.world();
    const double measured = b.bytes * factor / (b.gbps[a] * 1e9);
    const std::string size =
        b.bytes >= kMiB
            ? std::to_string(static_cast<int>(b.bytes / kMiB)) + " MiB"
            : std::to_string(static_cast<int>(b.bytes / kKiB)) + " KiB";
    rows.push_back({bench, size, kAlgorithms[a], measured,
                    SingleCallSeconds(p, c, k, b.bytes)});
  };
  for (const Busbw& b : kOneNode) {
    for (int a = 0; a < 3; ++a) single("allreduce 1x4", shm, {1, 4}, b, a);
  }
  for (const Busbw& b : kTwoNodes) {
    for (int a = 0; a < 3; ++a) single("allreduce 2x2", loopback, {2, 2}, b, a);
  }
  // fusion_bench: every gradient enqueued at once, then waited for; no
  // compute. README "Fusion": fused (default threshold) and unfused.
  struct Fusion {
    const char* workload;
    double fused_ms, unfused_ms;
  };
  for (const Fusion& f :
       {Fusion{"resnet50", 81.3, 77.4}, Fusion{"many-small", 9.19, 38.2}}) {
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
  // negotiation_bench: us per active cycle, README "Negotiation cost".
  struct Negotiation {
    int tensors;
    double on_us, off_us;
  };
  for (const Negotiation& n :
       {Negotiation{161, 339, 563}, Negotiation{1000, 1120, 2259}}) {
    const std::string t = std::to_string(n.tensors) + " tensors";
    rows.push_back({"negotiation", t, "cache on", n.on_us * 1e-6,
                    NegotiationSeconds(shm, {1, 4}, n.tensors, true)});
    rows.push_back({"negotiation", t, "cache off", n.off_us * 1e-6,
                    NegotiationSeconds(shm, {1, 4}, n.tensors, false)});
  }
  return rows;
}

void FitPresets(Preset& shm, Preset& loopback, const std::string& shapes_dir) {
  // The fitted constants; the loopback preset shares the host constants.
  double* params[] = {
      &shm.intra_alpha, &shm.intra_bw,         &shm.reduce_bw,
      &shm.copy_bw,     &shm.call_s,           &shm.segment_s,
      &shm.cycle_s,     &shm.tensor_s,         &shm.cached_s,
      &shm.request_s,   &loopback.inter_alpha, &loopback.inter_bw};
  auto loss = [&] {
    Preset lb = loopback;
    const double inter_alpha = lb.inter_alpha, inter_bw = lb.inter_bw;
    lb = shm;
    lb.name = loopback.name;
    lb.inter_alpha = inter_alpha;
    lb.inter_bw = inter_bw;
    double sum = 0;
    const auto rows = Calibrate(shm, lb, shapes_dir);
    for (const CalibrationRow& r : rows) {
      const double e = std::log(r.predicted_s / r.measured_s);
      sum += e * e;
    }
    return sum / rows.size();
  };
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
  const double inter_alpha = loopback.inter_alpha, inter_bw = loopback.inter_bw;
  const std::string name = loopback.name, description = loopback.description;
  loopback = shm;
  loopback.name = name;
  loopback.description = description;
  loopback.inter_alpha = inter_alpha;
  loopback.inter_bw = inter_bw;
}

}  // namespace hvdtune::sim
