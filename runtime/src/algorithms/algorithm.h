// Allreduce algorithms: one per file behind this interface, listed once in
// the registry (registry.cc). Adding one = a .h/.cc pair, a test, a registry
// line and a choice in kAllreduceAlgorithmChoices.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/mpi/mpi_context.h"
#include "hvdtune/knobs.h"
#include "hvdtune/status.h"

namespace hvdtune::internal {

/// What an algorithm may use for one call.
struct AlgorithmContext {
  Backend& backend;
  const MpiContext& mpi;
  const MpiTypes& types;
  const KnobSettings& knobs;
};

class AllreduceAlgorithm {
 public:
  virtual ~AllreduceAlgorithm() = default;
  virtual std::string_view name() const = 0;
  /// out = reduce over ranks of in, `count` elements; in may equal out.
  /// op is kSum, kMin or kMax (the runtime divides for kAverage).
  virtual Status Run(const AlgorithmContext& ctx, const void* in, void* out,
                     std::int64_t count, DataType dtype, ReduceOp op) = 0;
};

/// One instance of every registered algorithm, indexed like the allreduce
/// algorithm knob's choices.
std::vector<std::unique_ptr<AllreduceAlgorithm>> MakeAllreduceAlgorithms();

}  // namespace hvdtune::internal
