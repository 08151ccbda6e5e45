// Calibration of the CPU presets against measurements of this machine
// (docs/simulator.md, "Calibration"): lone allreduce calls on 4 ranks
// and on 2 emulated nodes x 2 ranks, fusion steps, negotiation per cycle,
// and synthetic_train steps at several cycle times (the cycle loop).
#pragma once

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

/// Fits the host and link constants of the two presets (log-space
/// coordinate search on the mean squared log error); returns the fitted
/// presets in place.
void FitPresets(Preset& shm, Preset& loopback, const std::string& shapes_dir);

}  // namespace hvdtune::sim
