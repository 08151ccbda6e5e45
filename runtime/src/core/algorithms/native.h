#pragma once

#include "core/algorithms/algorithm.h"

namespace hvdtune::internal {

/// The backend library's own allreduce (MPI_Allreduce / ncclAllReduce).
class NativeAllreduce final : public AllreduceAlgorithm {
 public:
  std::string_view name() const override { return "native"; }
  Status Run(const AlgorithmContext& ctx, const void* in, void* out,
             std::int64_t count, DataType dtype, ReduceOp op) override {
    return ctx.backend.Allreduce(in, out, count, dtype, op);
  }
  bool has_device_version() const override { return true; }
  Status RunDevice(const AlgorithmContext& ctx, const void* in, void* out,
                   std::int64_t count, DataType dtype, ReduceOp op) override {
    return ctx.device->Allreduce(in, out, count, dtype, op);
  }
};

}  // namespace hvdtune::internal
