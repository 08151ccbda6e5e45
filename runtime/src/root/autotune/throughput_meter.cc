#include "root/autotune/throughput_meter.h"

namespace hvdtune::internal {

void ThroughputMeter::OnTensorDone(const std::string& name, double bytes,
                                   double now) {
  if (!explicit_steps_) {
    if (!started_) {
      started_ = true;
      step_start_ = now;
    } else if (seen_.count(name)) {
      // The first tensor of the next step: the step just ended spans from
      // the previous step's first completion to this one.
      CloseStep(now);
    }
    seen_.insert(name);
  }
  step_bytes_ += bytes;
}

void ThroughputMeter::MarkStep(double now) {
  if (!explicit_steps_) {
    // From now on only the application's marks count.
    explicit_steps_ = true;
    seen_.clear();
    started_ = true;
    step_start_ = now;
    step_bytes_ = 0;
    return;
  }
  CloseStep(now);
}

void ThroughputMeter::CloseStep(double now) {
  done_.push_back({step_bytes_, now - step_start_, now});
  step_start_ = now;
  step_bytes_ = 0;
  seen_.clear();
}

std::vector<ThroughputMeter::Step> ThroughputMeter::TakeSteps() {
  std::vector<Step> out;
  out.swap(done_);
  return out;
}

}  // namespace hvdtune::internal
