// Allreduce algorithms: one per file behind this interface, listed once in
// the registry (registry.cc). Adding one = a .h/.cc pair and a registry
// line: the knob's choices, the tuner's search space and the tests that
// iterate over AllreduceAlgorithms() follow from the registry.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/backends/backend.h"
#include "core/backends/mpi/mpi_context.h"
#include "hvdtune/knobs.h"
#include "hvdtune/status.h"

namespace hvdtune::internal {

/// What an algorithm may use for one call.
struct AlgorithmContext {
  Backend& backend;
  const MpiContext& mpi;
  const MpiTypes& types;
  const KnobSettings& knobs;
  /// The NCCL backend for device buffers; null without one.
  Backend* device = nullptr;
};

class AllreduceAlgorithm {
 public:
  virtual ~AllreduceAlgorithm() = default;
  virtual std::string_view name() const = 0;
  /// out = reduce over ranks of in, `count` elements; in may equal out.
  /// op is kSum, kMin or kMax (the runtime divides for kAverage).
  virtual Status Run(const AlgorithmContext& ctx, const void* in, void* out,
                     std::int64_t count, DataType dtype, ReduceOp op) = 0;

  /// Whether the result path depends on the node layout (local and cross
  /// communicators); layout-independent algorithms are tested on one.
  virtual bool uses_node_layout() const { return false; }

  /// Whether RunDevice() exists. A device tensor asked to use an algorithm
  /// without one runs on the device backend's own allreduce instead (the
  /// docs/design.md documents this; the collective event names what ran).
  virtual bool has_device_version() const { return false; }
  /// The same on device buffers, with ctx.device set; op may be kAverage
  /// (the device backend averages itself).
  virtual Status RunDevice(const AlgorithmContext& ctx, const void* in,
                           void* out, std::int64_t count, DataType dtype,
                           ReduceOp op) {
    (void)ctx, (void)in, (void)out, (void)count, (void)dtype, (void)op;
    return Status::Internal("allreduce algorithm '" + std::string(name()) +
                            "' has no device version");
  }
};

/// One instance of every registered algorithm, in registry order (the
/// allreduce_algorithm knob's value indexes it).
std::vector<std::unique_ptr<AllreduceAlgorithm>> MakeAllreduceAlgorithms();

}  // namespace hvdtune::internal
