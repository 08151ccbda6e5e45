// Helpers shared by the multi-rank suites.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hvdtune/half.h"
#include "hvdtune/runtime.h"

namespace hvdtune::testing_util {

inline int WorldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// The engine the runtimes of this run use: Gloo for the gloo_* variants
/// of the suites (HVDTUNE_TEST_ENGINE=gloo, mpi_main.cc), else MPI.
inline EngineKind TestEngine() {
  const char* e = std::getenv("HVDTUNE_TEST_ENGINE");
  return e != nullptr && std::string(e) == "gloo" ? EngineKind::kGloo
                                                  : EngineKind::kMpi;
}

inline int WorldSize() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

/// One runtime for the suites that need no special configuration; shut
/// down by the environment before MPI_Finalize.
Runtime& SharedRuntime();
void ShutdownSharedRuntime();

/// Element i of rank r's input: small values whose sums are exact in every
/// dtype (multiples of 1/4 below 64 for floats, small integers otherwise).
inline double InputValue(DataType dt, int rank, std::int64_t i) {
  switch (dt) {
    case DataType::kUInt8:
      return static_cast<double>((i * 7 + rank * 13) % 11);
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      return static_cast<double>((i * 7 + rank * 13) % 23 - 11);
    case DataType::kBool:
      return static_cast<double>((i + rank) % 2);
    default:
      return static_cast<double>((i * 31 + rank * 17) % 97 - 48) * 0.25;
  }
}

/// Element i of rank r's input to a product: factors of magnitude 2 at most,
/// so that the product over 4 ranks is exact in every dtype.
inline double ProductValue(DataType dt, int rank, std::int64_t i) {
  const std::int64_t k = (i * 3 + rank * 5) % 5;
  if (dt == DataType::kUInt8) return k == 1 ? 2 : 1;
  constexpr double kFloat[] = {1, 2, -1, 0.5, -2};
  constexpr double kInt[] = {1, 2, -1, 1, -2};
  return dt == DataType::kFloat16 || dt == DataType::kBFloat16 ||
                 dt == DataType::kFloat32 || dt == DataType::kFloat64
             ? kFloat[k]
             : kInt[k];
}

/// Rank `rank`'s input element i for a reduction by `op`.
inline double InputFor(DataType dt, ReduceOp op, int rank, std::int64_t i) {
  return op == ReduceOp::kProduct ? ProductValue(dt, rank, i)
                                  : InputValue(dt, rank, i);
}

inline void Store(DataType dt, void* buf, std::int64_t i, double v) {
  switch (dt) {
    case DataType::kUInt8:
      static_cast<std::uint8_t*>(buf)[i] = static_cast<std::uint8_t>(v);
      break;
    case DataType::kInt32:
      static_cast<std::int32_t*>(buf)[i] = static_cast<std::int32_t>(v);
      break;
    case DataType::kInt64:
      static_cast<std::int64_t*>(buf)[i] = static_cast<std::int64_t>(v);
      break;
    case DataType::kFloat16:
      static_cast<std::uint16_t*>(buf)[i] = FloatToHalf(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      static_cast<std::uint16_t*>(buf)[i] =
          FloatToBFloat16(static_cast<float>(v));
      break;
    case DataType::kFloat32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      break;
    case DataType::kFloat64:
      static_cast<double*>(buf)[i] = v;
      break;
    case DataType::kInt8:
      static_cast<std::int8_t*>(buf)[i] = static_cast<std::int8_t>(v);
      break;
    case DataType::kInt16:
      static_cast<std::int16_t*>(buf)[i] = static_cast<std::int16_t>(v);
      break;
    case DataType::kBool:
      static_cast<std::uint8_t*>(buf)[i] = v != 0 ? 1 : 0;
      break;
  }
}

inline double Load(DataType dt, const void* buf, std::int64_t i) {
  switch (dt) {
    case DataType::kUInt8:
      return static_cast<const std::uint8_t*>(buf)[i];
    case DataType::kInt32:
      return static_cast<const std::int32_t*>(buf)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const std::int64_t*>(buf)[i]);
    case DataType::kFloat16:
      return HalfToFloat(static_cast<const std::uint16_t*>(buf)[i]);
    case DataType::kBFloat16:
      return BFloat16ToFloat(static_cast<const std::uint16_t*>(buf)[i]);
    case DataType::kFloat32:
      return static_cast<const float*>(buf)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(buf)[i];
    case DataType::kInt8:
      return static_cast<const std::int8_t*>(buf)[i];
    case DataType::kInt16:
      return static_cast<const std::int16_t*>(buf)[i];
    case DataType::kBool:
      return static_cast<const std::uint8_t*>(buf)[i];
  }
  return 0;
}

inline bool IsInteger(DataType dt) {
  return dt == DataType::kUInt8 || dt == DataType::kInt32 ||
         dt == DataType::kInt64 || dt == DataType::kInt8 ||
         dt == DataType::kInt16 || dt == DataType::kBool;
}

/// The expected allreduce of element i over `size` ranks.
inline double Reference(DataType dt, ReduceOp op, int size, std::int64_t i) {
  double acc = InputFor(dt, op, 0, i);
  for (int r = 1; r < size; ++r) {
    const double v = InputFor(dt, op, r, i);
    if (op == ReduceOp::kMin) {
      acc = std::min(acc, v);
    } else if (op == ReduceOp::kMax) {
      acc = std::max(acc, v);
    } else if (op == ReduceOp::kProduct) {
      acc *= v;
    } else {
      acc += v;
    }
  }
  if (op == ReduceOp::kAverage) {
    acc = IsInteger(dt) ? std::trunc(acc / size) : acc / size;
  }
  return acc;
}

/// Relative tolerance of an average in `dt` (the sums are exact).
inline double AverageTolerance(DataType dt) {
  switch (dt) {
    case DataType::kFloat16:
      return std::ldexp(1.0, -10);
    case DataType::kBFloat16:
      return std::ldexp(1.0, -7);
    case DataType::kFloat32:
      return std::ldexp(1.0, -23);
    default:
      return 0;
  }
}

/// Fills `count` elements with rank `rank`'s input to a reduction by `op`.
inline void FillInput(DataType dt, void* buf, std::int64_t count, int rank,
                      ReduceOp op = ReduceOp::kSum) {
  for (std::int64_t i = 0; i < count; ++i) {
    Store(dt, buf, i, InputFor(dt, op, rank, i));
  }
}

/// Counts elements differing from the reference; reports the first few.
inline std::int64_t CountWrong(DataType dt, ReduceOp op, int size,
                               const void* out, std::int64_t count) {
  std::int64_t wrong = 0;
  const double tol = op == ReduceOp::kAverage ? AverageTolerance(dt) : 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double want = Reference(dt, op, size, i);
    const double got = Load(dt, out, i);
    if (std::fabs(got - want) > tol * std::fabs(want)) {
      if (wrong < 3) {
        ADD_FAILURE() << DataTypeName(dt) << " " << ReduceOpName(op)
                      << " element " << i << ": got " << got << ", want "
                      << want;
      }
      ++wrong;
    }
  }
  return wrong;
}

// Rank r's rows of a tensor of `rows` rows (Horovod's split).
inline std::int64_t ShareOf(std::int64_t rows, int size, int r) {
  return rows / size + (r < rows % size ? 1 : 0);
}
inline std::int64_t FirstRowOf(std::int64_t rows, int size, int r) {
  std::int64_t first = 0;
  for (int q = 0; q < r; ++q) first += ShareOf(rows, size, q);
  return first;
}

// This rank's share of the reduction of every rank's FillInput(op) tensor
// of rows x cols: wrong elements counted (the first few reported).
inline std::int64_t CountWrongShare(DataType dt, ReduceOp op, const Runtime& rt,
                                    std::int64_t rows, std::int64_t cols,
                                    const Handle& h, std::size_t part) {
  const std::int64_t mine = ShareOf(rows, rt.size(), rt.rank());
  const std::int64_t first = FirstRowOf(rows, rt.size(), rt.rank());
  EXPECT_EQ(h.output_shape(part), (std::vector<std::int64_t>{mine, cols}));
  EXPECT_EQ(h.output(part).size(),
            static_cast<std::size_t>(mine * cols) * DataTypeSize(dt));
  if (h.output(part).size() !=
      static_cast<std::size_t>(mine * cols) * DataTypeSize(dt)) {
    return mine * cols;
  }
  std::int64_t wrong = 0;
  const double tol = op == ReduceOp::kAverage ? AverageTolerance(dt) : 0;
  for (std::int64_t i = 0; i < mine * cols; ++i) {
    const double want = Reference(dt, op, rt.size(), first * cols + i);
    const double got = Load(dt, h.output(part).data(), i);
    if (std::fabs(got - want) > tol * std::fabs(want)) {
      if (wrong++ < 3) {
        ADD_FAILURE() << DataTypeName(dt) << " " << ReduceOpName(op)
                      << " element " << i << ": got " << got << ", want "
                      << want;
      }
    }
  }
  return wrong;
}

/// True when every rank holds exactly the same bytes.
inline bool SameOnAllRanks(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  std::vector<std::uint64_t> all(static_cast<std::size_t>(WorldSize()));
  MPI_Allgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T,
                MPI_COMM_WORLD);
  for (std::uint64_t x : all) {
    if (x != all[0]) return false;
  }
  return true;
}

/// Waits (bounded) until `pred` holds.
template <typename Pred>
bool WaitFor(Pred pred, double seconds = 30) {
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Runs `n` float32 sum allreduces named prefix.i of (i % 13) + 1 elements,
// enqueued in `order`, and checks each against the reference.
/// Tensor i of a set (RunSet's sizes and inputs): its element count, and
/// whether `y` holds its sum over every rank.
inline std::int64_t SetCount(int i) {
  return i % 13 + 1 + (i % 5 == 0 ? 5000 : 0);
}
inline ::testing::AssertionResult IsSetSum(const Runtime& rt, int i,
                                           std::span<const float> y) {
  for (std::size_t k = 0; k < y.size(); ++k) {
    double want = 0;
    for (int r = 0; r < rt.size(); ++r) {
      want +=
          InputValue(DataType::kFloat32, r + i, static_cast<std::int64_t>(k));
    }
    if (y[k] != want) {
      return ::testing::AssertionFailure()
             << "tensor " << i << "[" << k << "] is " << y[k] << ", not "
             << want;
    }
  }
  return ::testing::AssertionSuccess();
}

inline void RunSet(Runtime& rt, const std::string& prefix, int n,
                   std::vector<int> order,
                   std::vector<std::vector<float>>* outs) {
  std::vector<std::vector<float>> in(static_cast<std::size_t>(n));
  outs->assign(static_cast<std::size_t>(n), {});
  std::vector<Handle> handles(static_cast<std::size_t>(n));
  for (int i : order) {
    const std::int64_t count = SetCount(i);
    auto& x = in[static_cast<std::size_t>(i)];
    auto& y = (*outs)[static_cast<std::size_t>(i)];
    x.resize(static_cast<std::size_t>(count));
    y.resize(static_cast<std::size_t>(count));
    FillInput(DataType::kFloat32, x.data(), count, rt.rank() + i);
    const std::int64_t shape[] = {count};
    handles[static_cast<std::size_t>(i)] =
        rt.Allreduce(prefix + "." + std::to_string(i), x.data(), y.data(),
                     shape, DataType::kFloat32, ReduceOp::kSum);
  }
  for (int i = 0; i < n; ++i) {
    const Status s = handles[static_cast<std::size_t>(i)].Wait();
    ASSERT_TRUE(s.ok()) << prefix << "." << i << ": " << s.ToString();
    ASSERT_TRUE(IsSetSum(rt, i, (*outs)[static_cast<std::size_t>(i)]))
        << prefix;
  }
}

inline std::vector<int> Iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace hvdtune::testing_util
