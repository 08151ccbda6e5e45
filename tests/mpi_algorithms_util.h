// What the algorithm suites share (mpi_algorithms_test.cc, the MPI engine's
// algorithms and both engines through the Runtime; mpi_gloo_algorithms_test.cc,
// the Gloo engine's own): the dtypes and wire ops they cover and one allreduce
// of the Runtime with its input and output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hvdtune/runtime.h"
#include "mpi_test_util.h"

namespace hvdtune::testing_util {

constexpr DataType kDtypes[] = {
    DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
    DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
    DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
constexpr ReduceOp kWireOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax,
                                 ReduceOp::kProduct};

// One allreduce of the Runtime suites: this rank's FillInput(op) tensor and
// an output of 0xAB bytes.
struct AllreduceItem {
  DataType dtype;
  ReduceOp op;
  std::int64_t count;
  std::vector<std::uint8_t> in, out;
  Handle handle;

  static AllreduceItem Make(DataType dtype, ReduceOp op, std::int64_t count,
                            int rank) {
    AllreduceItem it{dtype, op, count, {}, {}, {}};
    const std::size_t bytes =
        static_cast<std::size_t>(count) * DataTypeSize(dtype);
    it.in.resize(bytes);
    it.out.assign(bytes, 0xAB);
    FillInput(dtype, it.in.data(), count, rank, op);
    return it;
  }
};

}  // namespace hvdtune::testing_util
