// The synthetic model that synthetic_train trains and `hvd-tune sweep`
// measures: per-layer backward compute on real buffers, each layer's
// gradient enqueued as soon as it is computed (last layer first), so
// communication overlaps compute as in a real job. Both programs share it so
// that a sweep scores configurations exactly as the trainer's online
// autotuner does, and both compute the same fingerprint.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hvdtune/grouping.h"
#include "hvdtune/runtime.h"
#include "hvdtune/workloads/gradient_set.h"
#include "hvdtune/workloads/mpi_session.h"
#include "hvdtune/workloads/synthetic_compute.h"

namespace hvdtune::workloads {

// Reduced value of element j of any gradient at `step`, summed over `ranks`
// ranks whose rank r contributed (r + 1) * (j % 7 + 1) + step % 5.
inline double ExpectedSum(std::int64_t j, std::int64_t step, int ranks) {
  return static_cast<double>((j % 7 + 1) * ranks * (ranks + 1) / 2 +
                             ranks * (step % 5));
}

// The model's parameters as gradient and reduced-gradient buffers, and the
// arithmetic that stands in for each layer's backward computation.
class SyntheticModel {
 public:
  SyntheticModel(std::vector<TensorSpec> tensors, std::string prefix,
                 double flops_per_param, int rank, int ranks)
      : tensors_(std::move(tensors)),
        flops_per_param_(flops_per_param),
        rank_(rank),
        ranks_(ranks),
        scratch_(1024, 1.0f) {
    for (TensorSpec& t : tensors_) {
      names_.push_back(prefix + "." + t.name);
      shapes_.push_back({t.count});
      grads_.emplace_back(static_cast<std::size_t>(t.count), 0.0f);
      reduced_.emplace_back(static_cast<std::size_t>(t.count), 0.0f);
      total_elements_ += t.count;
    }
  }

  std::size_t layers() const { return tensors_.size(); }
  std::int64_t total_bytes() const { return total_elements_ * 4; }

  // Backward of layer `i` at `step`: flops_per_param x parameters of
  // multiply-adds on a cache-resident scratch buffer, then the gradient.
  void Backward(std::size_t i, std::int64_t step) {
    SyntheticArithmetic(scratch_.data(),
                        static_cast<std::int64_t>(scratch_.size()),
                        std::llround(static_cast<double>(tensors_[i].count) *
                                     flops_per_param_ / 2));

    std::vector<float>& g = grads_[i];
    const float base = static_cast<float>(rank_ + 1);
    const float offset = static_cast<float>(step % 5);
    for (std::size_t j = 0; j < g.size(); ++j) {
      g[j] = base * static_cast<float>(j % 7 + 1) + offset;
    }
  }

  Handle Allreduce(Runtime& rt, std::size_t i) {
    return rt.Allreduce(names_[i], grads_[i].data(), reduced_[i].data(),
                        shapes_[i], DataType::kFloat32, ReduceOp::kSum);
  }

  // Members [begin, end) of one group, as GroupedAllreduce takes them.
  std::vector<AllreduceTensor> GroupMembers(std::size_t begin,
                                            std::size_t end) {
    std::vector<AllreduceTensor> members;
    for (std::size_t i = begin; i < end; ++i) {
      members.push_back({names_[i], grads_[i].data(), reduced_[i].data(),
                         shapes_[i], DataType::kFloat32});
    }
    return members;
  }

  // Checks layer `i`'s reduced gradient after `step`; throws naming the
  // tensor, the step and the checksums on a mismatch.
  void Verify(std::size_t i, std::int64_t step) const {
    const std::vector<float>& out = reduced_[i];
    double got = 0;
    double want = 0;
    for (std::size_t j = 0; j < out.size(); ++j) {
      got += out[j];
      want += ExpectedSum(static_cast<std::int64_t>(j), step, ranks_);
    }
    if (got == want) return;
    std::size_t bad = 0;
    while (bad < out.size() &&
           out[bad] ==
               ExpectedSum(static_cast<std::int64_t>(bad), step, ranks_)) {
      ++bad;
    }
    std::ostringstream msg;
    msg.precision(17);
    msg << "wrong allreduce result: tensor " << names_[i] << " at step " << step
        << ": checksum " << got << ", expected " << want;
    if (bad < out.size()) {
      msg << " (first bad element " << bad << " = " << out[bad] << ", expected "
          << ExpectedSum(static_cast<std::int64_t>(bad), step, ranks_) << ")";
    }
    msg << " with knobs in force: tuning must never change results";
    throw std::runtime_error(msg.str());
  }

 private:
  std::vector<TensorSpec> tensors_;
  double flops_per_param_;
  int rank_;
  int ranks_;
  std::vector<float> scratch_;
  std::vector<std::string> names_;
  std::vector<std::vector<std::int64_t>> shapes_;
  std::vector<std::vector<float>> grads_;
  std::vector<std::vector<float>> reduced_;
  std::int64_t total_elements_ = 0;
};

// One backward pass with gradients enqueued as they are produced; waits for
// every collective. `num_groups` > 0 enqueues contiguous groups of layers
// with GroupedAllreduce as soon as a group's last-computed member is ready.
class StepRunner {
 public:
  StepRunner(Runtime& rt, SyntheticModel& model) : rt_(rt), model_(model) {}

  void Run(std::int64_t step, int num_groups) {
    if (num_groups != groups_for_) Regroup(num_groups);
    handles_.clear();
    compute_seconds_ = 0;
    std::size_t next_group = ranges_.size();
    for (std::size_t i = model_.layers(); i-- > 0;) {
      const double t0 = NowSeconds();
      model_.Backward(i, step);
      compute_seconds_ += NowSeconds() - t0;
      if (num_groups <= 0) {
        handles_.push_back(model_.Allreduce(rt_, i));
      } else if (next_group > 0 && ranges_[next_group - 1].first == i) {
        --next_group;
        handles_.push_back(rt_.GroupedAllreduce(
            group_names_[next_group], members_[next_group], ReduceOp::kSum));
      }
    }
    for (const Handle& h : handles_) WaitOk(h, "gradient allreduce");
  }

  /// Wall time of the last step's backward arithmetic: it grows when the
  /// runtime takes CPU the application's compute needed.
  double compute_seconds() const { return compute_seconds_; }

 private:
  void Regroup(int num_groups) {
    groups_for_ = num_groups;
    ranges_.clear();
    members_.clear();
    group_names_.clear();
    if (num_groups <= 0) return;
    ranges_ = SplitIntoGroups(model_.layers(), num_groups);
    for (std::size_t g = 0; g < ranges_.size(); ++g) {
      members_.push_back(
          model_.GroupMembers(ranges_[g].first, ranges_[g].second));
      group_names_.push_back(
          IndexedName(IndexedName("groups", num_groups) + ".", g));
    }
  }

  Runtime& rt_;
  SyntheticModel& model_;
  int groups_for_ = -1;
  std::vector<std::pair<std::size_t, std::size_t>> ranges_;
  std::vector<std::vector<AllreduceTensor>> members_;
  std::vector<std::string> group_names_;
  std::vector<Handle> handles_;
  double compute_seconds_ = 0;
};

}  // namespace hvdtune::workloads
