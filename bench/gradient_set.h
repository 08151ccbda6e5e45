// A set of named gradient tensors (float32, or mixed float16/float32), stored
// back to back in one input and one output buffer, the way a data-parallel step
// hands them to the runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hvdtune/runtime.h"

namespace hvdtune::bench {

struct TensorSpec {
  std::string name;
  std::int64_t count = 1;  // elements
  DataType dtype = DataType::kFloat32;
};

/// Reads `name dim0 dim1 ...` lines ('#' comments and blank lines skipped);
/// a tensor without dims is a scalar. Throws std::runtime_error naming the
/// file and line on malformed input.
std::vector<TensorSpec> LoadShapesFile(const std::string& path);

/// Multiplies every element count by `scale`, keeping at least one.
void ScaleTensors(std::vector<TensorSpec>& tensors, double scale);

class GradientSet {
 public:
  /// Names are prefixed with `prefix` + "." to stay unique across sets.
  GradientSet(const std::string& prefix, std::vector<TensorSpec> tensors);

  std::size_t size() const { return tensors_.size(); }
  std::int64_t total_elements() const { return total_; }
  std::int64_t total_bytes() const { return total_bytes_; }
  /// Every tensor is float32 (a raw MPI_Allreduce of the set is possible).
  bool single_dtype() const { return single_dtype_; }

  /// One training step: enqueue every tensor's allreduce (sum) from the last
  /// to the first, as backward produces them, then wait for all.
  void Step(Runtime& runtime);
  /// One MPI_Allreduce of all the bytes of the set, on the same buffers
  /// (float32 sets only).
  void RawAllreduce();
  /// The same, with what a fusion buffer adds: every tensor is copied into
  /// one staging buffer (backward order), reduced there in place, and copied
  /// back out to its output. The floor of fusion by copying.
  void RawAllreduceWithCopies();
  /// True when every tensor's first and last output element equal the number
  /// of ranks (every input element is 1).
  bool CheckOutput(int ranks) const;
  void ClearOutput();

 private:
  std::vector<TensorSpec> tensors_;
  std::vector<std::int64_t> offsets_;
  std::vector<std::vector<std::int64_t>> shapes_;
  std::vector<Handle> handles_;
  std::vector<std::uint8_t> staging_;
  std::int64_t total_ = 0;
  std::int64_t total_bytes_ = 0;
  bool single_dtype_ = true;
  std::vector<std::uint8_t> input_;
  std::vector<std::uint8_t> output_;
};

}  // namespace hvdtune::bench
