// Calibration of the CPU presets against measurements of this machine
// (docs/simulator.md, "Calibration"): lone allreduce calls on 4 ranks
// and on 2 emulated nodes x 2 ranks, fusion steps, negotiation per cycle,
// and synthetic_train steps at several cycle times (the cycle loop); and of
// the emulated-cluster presets against training steps on the emulated
// cluster (tools/cluster.sh, 2 nodes x 2 ranks, per link preset).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim_model.h"

namespace hvdtune::sim {

struct CalibrationRow {
  std::string bench;     // "allreduce 1x4", "allreduce 2x2", "fusion", ...
  std::string workload;  // size or workload
  std::string algorithm;
  double measured_s = 0;
  double predicted_s = 0;
  double error() const { return predicted_s / measured_s - 1; }
};

/// Every measurement with the prediction of `shm` (one node) and `loopback`
/// (two emulated nodes).
std::vector<CalibrationRow> Calibrate(const Preset& shm, const Preset& loopback,
                                      const std::string& shapes_dir);

/// The mean over `rows` (not empty) of the squared log of predicted over
/// measured: what the fits minimise.
double MeanSquaredLogError(const std::vector<CalibrationRow>& rows);

/// Fits the host and link constants of the two presets (log-space
/// coordinate search on the mean squared log error); returns the fitted
/// presets in place.
void FitPresets(Preset& shm, Preset& loopback, const std::string& shapes_dir);

/// The link presets of the emulated cluster that have measurements, by
/// tools/cluster.sh's name: "1gbe", "10gbe".
std::vector<std::string> EmulatedLinks();

/// The simulator's preset of the emulated cluster on `link`:
/// "emulated-" + link.
std::string EmulatedPresetName(const std::string& link);

/// synthetic_train steps on the emulated cluster with `link` (2 nodes x 2
/// ranks; default knobs but the allreduce algorithm; three workloads), each
/// with the prediction of `preset`, given the compute measured in the same
/// runs.
std::vector<CalibrationRow> CalibrateCluster(const Preset& preset,
                                             const std::string& link,
                                             const std::string& shapes_dir);

/// Fits `preset` to the steps measured on `link`, in place: the link's
/// bandwidth (inter_bw) and the two host costs that TCP between the nodes
/// changes (segment_s: a ring segment is a TCP send and receive;
/// tensor_s: the cycle thread shares the cores with the kernel's TCP
/// work). The other constants are held: cpu-shm's, and inter_alpha.
void FitLink(Preset& preset, const std::string& link,
             const std::string& shapes_dir);

/// Where a held-out fit starts, so that nothing fitted to any row leaks in:
/// cpu-shm's constants, the loopback fit's TCP latency, and `link`'s
/// nominal rate (1gbe: 125 MB/s; 10gbe: 1.25 GB/s) as its bandwidth.
Preset UnfittedLinkPreset(const std::string& link);

/// Link `link`'s nominal rate in bytes/s (its tbf rate, tools/cluster.sh).
double NominalLinkBandwidth(const std::string& link);

/// The workloads measured on the emulated cluster, in table order.
std::vector<std::string> EmulatedWorkloads();

/// Leave one workload out: for each workload W of `link`, FitLink from
/// UnfittedLinkPreset on the rows of the other workloads, then W's rows
/// predicted by that fit. Every returned row's prediction comes from a fit
/// that did not see it (the compute measured in the same run is an input
/// of every prediction, never fitted).
std::vector<CalibrationRow> HeldOutWorkloads(const std::string& link,
                                             const std::string& shapes_dir);

/// Across links: FitLink from UnfittedLinkPreset(fit_link) on every row of
/// `fit_link`; its per-segment and per-tensor costs carried over to
/// `predict_link`, whose bandwidth is its nominal rate (nothing of
/// `predict_link`'s rows is fitted), then `predict_link`'s rows predicted.
std::vector<CalibrationRow> HeldOutLink(const std::string& fit_link,
                                        const std::string& predict_link,
                                        const std::string& shapes_dir);

/// Count within 25%, median and max |error| of `rows` (not empty).
struct ErrorSummary {
  std::size_t rows = 0, within_25 = 0;
  double median = 0, max = 0;
};
ErrorSummary SummariseErrors(const std::vector<CalibrationRow>& rows);

}  // namespace hvdtune::sim
