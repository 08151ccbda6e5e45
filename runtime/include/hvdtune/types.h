// Element types, reduction operations and collective kinds shared by every
// part of the runtime and its bindings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace hvdtune {

/// Element type of a tensor. Values are stable: they appear in the C API and
/// on the wire between ranks.
enum class DataType : std::uint8_t {
  kUInt8 = 0,
  kInt32 = 1,
  kInt64 = 2,
  kFloat16 = 3,
  kBFloat16 = 4,
  kFloat32 = 5,
  kFloat64 = 6,
  kInt8 = 7,
  kInt16 = 8,
  /// One byte per element, 0 or 1. Moved by broadcast, allgather and
  /// alltoall; never reduced.
  kBool = 9,
};
inline constexpr int kNumDataTypes = 10;

/// Reduction applied by allreduce and reducescatter. kAverage is the sum
/// divided by the number of ranks (truncated toward zero for integer types).
enum class ReduceOp : std::uint8_t {
  kSum = 0,
  kAverage = 1,
  kMin = 2,
  kMax = 3,
  kProduct = 4,
};
inline constexpr int kNumReduceOps = 5;

enum class CollectiveType : std::uint8_t {
  kAllreduce = 0,
  kBroadcast = 1,
  kAllgather = 2,
  kBarrier = 3,
  kReducescatter = 4,
  kAlltoall = 5,
  kJoin = 6,
};
inline constexpr int kNumCollectiveTypes = 7;

/// Size in bytes of one element of `dtype`.
std::size_t DataTypeSize(DataType dtype);
std::string_view DataTypeName(DataType dtype);
std::string_view ReduceOpName(ReduceOp op);
std::string_view CollectiveTypeName(CollectiveType type);

/// Parse names as printed by the *Name functions ("float32", "sum", ...).
std::optional<DataType> ParseDataType(std::string_view name);
std::optional<ReduceOp> ParseReduceOp(std::string_view name);

}  // namespace hvdtune
