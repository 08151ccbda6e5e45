// Pictures of a tuning run as standalone SVG (no plotting library): the
// score of every sample with the running best and the phases as bands, and
// the score over two knobs with every sampled point.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hvdtune/knobs.h"

namespace hvdtune::cli {

struct PlotSample {
  /// 1-based over the whole picture.
  int number = 0;
  /// "warmup", "exploring", "frozen", "retuning", "sweep", ...
  std::string phase;
  /// Bytes reduced per second.
  double score = 0;
  KnobSettings knobs;
};

struct PlotData {
  std::string title;
  std::vector<PlotSample> samples;
  /// Sample numbers where a new run starts, with a label ("run 2, store").
  std::vector<std::pair<int, std::string>> run_starts;
  /// The store's best configuration, ringed in the knobs picture (without
  /// one, the best-scoring sample is).
  std::optional<KnobSettings> best;
};

/// Score per sample: one circle (class "sample") per sample coloured by
/// phase, phase bands behind them, the running best as a step line.
std::string ProgressSvg(const PlotData& data);

/// Score over knobs `x` and `y`: one circle (class "sample") per sample at
/// its knob values, coloured by score, the best configuration ringed. Log axes
/// for log-scaled knobs, one column per choice for categorical and on/off ones.
std::string KnobsSvg(const PlotData& data, KnobId x, KnobId y);

}  // namespace hvdtune::cli
