// Measures what a training step reduces and how long it takes, from the
// stream of completed tensors alone.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

namespace hvdtune::internal {

/// A step is one pass over the job's tensor set. Without help it is found
/// from repeating names: when a tensor completes whose name was already seen
/// since the last boundary, a new step has begun. An application may mark
/// steps itself (MarkStep), which turns name detection off.
class ThroughputMeter {
 public:
  struct Step {
    double bytes = 0;
    double seconds = 0;
    double end_time = 0;
  };

  /// A tensor of `bytes` finished at `now` (seconds, any monotonic origin).
  void OnTensorDone(const std::string& name, double bytes, double now);
  /// The application says a step ended at `now`.
  void MarkStep(double now);

  /// Steps completed since the last call, oldest first.
  std::vector<Step> TakeSteps();

 private:
  void CloseStep(double now);

  bool explicit_steps_ = false;
  bool started_ = false;
  double step_start_ = 0;
  double step_bytes_ = 0;
  std::unordered_set<std::string> seen_;
  std::vector<Step> done_;
};

}  // namespace hvdtune::internal
