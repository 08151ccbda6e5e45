// A set of named gradient tensors (float32, or mixed float16/float32), stored
// back to back in one input and one output buffer, the way a data-parallel step
// hands them to the runtime: allreduced (data parallel), reducescattered (a
// sharded optimizer: each rank keeps its share of every gradient's rows) or
// sent alltoall (expert-parallel layers: every rank sends each tensor's rows
// split evenly over the ranks).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hvdtune/runtime.h"

namespace hvdtune::workloads {

/// `prefix` followed by `index` ("t17"). Appends rather than using
/// operator+, which trips GCC 12's false -Wrestrict (PR 105329) at -O2.
std::string IndexedName(std::string_view prefix, std::int64_t index);

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

enum class Collective { kAllreduce, kReducescatter, kAlltoall };

/// "allreduce", "reducescatter", "alltoall".
std::string_view CollectiveName(Collective collective);

class GradientSet {
 public:
  /// Names are prefixed with `prefix` + "." to stay unique across sets. Each
  /// tensor is one-dimensional (count rows); `rank` and `size` are this
  /// rank's place in the job (they set the inputs and the expected outputs).
  GradientSet(const std::string& prefix, std::vector<TensorSpec> tensors,
              Collective collective, int rank, int size);

  std::size_t size() const { return tensors_.size(); }
  std::int64_t total_elements() const { return total_; }
  std::int64_t total_bytes() const { return total_bytes_; }
  /// Every tensor is float32 (a raw MPI_Allreduce of the set is possible).
  bool single_dtype() const { return single_dtype_; }

  Collective collective() const { return collective_; }

  /// One training step: enqueue every tensor's collective (sum for the
  /// reductions) from the last to the first, as backward produces them, then
  /// wait for all.
  void Step(Runtime& runtime);
  /// One raw MPI call moving all the bytes of the set, on the same buffers
  /// (float32 sets only): MPI_Allreduce, MPI_Reduce_scatter_block or
  /// MPI_Alltoall (the last two of the largest multiple of size elements).
  void RawCollective();
  /// The same, with what a fusion buffer adds: every tensor is copied into
  /// one staging buffer (backward order), reduced there in place, and copied
  /// back out to its output. The floor of fusion by copying.
  void RawAllreduceWithCopies();
  /// Empty when every output element of the last Step() is exact; else what
  /// was wrong (the tensor, the element, the value and the expected one).
  /// Row k of every rank's input is rank + 1 + 8 (k % 8): an allreduce or
  /// reducescatter row k is size (size + 1) / 2 + size * 8 (k % 8); the
  /// rows an alltoall received from rank s are s + 1 + 8 (k % 8), k counted
  /// in the sender's tensor (and there are as many as it sent).
  /// Also checks RawAllreduceWithCopies() (the same output buffer).
  std::string CheckOutput() const;
  void ClearOutput();

 private:
  /// Rows of `count` that go to (or stay with) rank `r`: Horovod's split.
  std::int64_t RowsOf(std::int64_t count, int r) const;
  /// Element k of `data` must be base + pattern_weight * RowPattern(
  /// first_row + k); `first_element` numbers them in the message.
  std::string CheckValues(std::size_t i, const std::uint8_t* data,
                          std::int64_t count, float base, float pattern_weight,
                          std::int64_t first_row,
                          std::int64_t first_element) const;

  std::vector<TensorSpec> tensors_;
  Collective collective_;
  int rank_;
  int ranks_;
  std::vector<std::int64_t> offsets_;
  /// Where tensor i's share of the rows lands (reducescatter).
  std::vector<std::int64_t> out_offsets_;
  std::vector<std::vector<std::int64_t>> splits_;
  std::vector<std::vector<std::int64_t>> shapes_;
  std::vector<Handle> handles_;
  std::vector<std::uint8_t> staging_;
  std::int64_t total_ = 0;
  std::int64_t total_bytes_ = 0;
  bool single_dtype_ = true;
  std::vector<std::uint8_t> input_;
  std::vector<std::uint8_t> output_;
};

}  // namespace hvdtune::workloads
