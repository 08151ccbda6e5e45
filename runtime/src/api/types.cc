#include "hvdtune/types.h"

#include <array>

#include "hvdtune/status.h"

namespace hvdtune {
namespace {

constexpr std::array<std::string_view, kNumDataTypes> kDataTypeNames = {
    "uint8",   "int32",   "int64", "float16", "bfloat16",
    "float32", "float64", "int8",  "int16",   "bool"};
constexpr std::array<std::size_t, kNumDataTypes> kDataTypeSizes = {
    1, 4, 8, 2, 2, 4, 8, 1, 2, 1};
constexpr std::array<std::string_view, kNumReduceOps> kReduceOpNames = {
    "sum", "average", "min", "max", "product"};

}  // namespace

std::size_t DataTypeSize(DataType dtype) {
  return kDataTypeSizes[static_cast<int>(dtype)];
}

std::string_view DataTypeName(DataType dtype) {
  return kDataTypeNames[static_cast<int>(dtype)];
}

std::string_view ReduceOpName(ReduceOp op) {
  return kReduceOpNames[static_cast<int>(op)];
}

std::string_view CollectiveTypeName(CollectiveType type) {
  switch (type) {
    case CollectiveType::kAllreduce:
      return "allreduce";
    case CollectiveType::kBroadcast:
      return "broadcast";
    case CollectiveType::kAllgather:
      return "allgather";
    case CollectiveType::kBarrier:
      return "barrier";
    case CollectiveType::kReducescatter:
      return "reducescatter";
    case CollectiveType::kAlltoall:
      return "alltoall";
    case CollectiveType::kJoin:
      return "join";
  }
  return "unknown";
}

std::optional<DataType> ParseDataType(std::string_view name) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (kDataTypeNames[i] == name) return static_cast<DataType>(i);
  }
  return std::nullopt;
}

std::optional<ReduceOp> ParseReduceOp(std::string_view name) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (kReduceOpNames[i] == name) return static_cast<ReduceOp>(i);
  }
  return std::nullopt;
}

std::string Status::ToString() const {
  switch (code_) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInProgress:
      return "IN_PROGRESS";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT: " + message_;
    case StatusCode::kMismatch:
      return "MISMATCH: " + message_;
    case StatusCode::kAborted:
      return "ABORTED: " + message_;
    case StatusCode::kInternal:
      return "INTERNAL: " + message_;
    case StatusCode::kStalled:
      return "STALLED: " + message_;
  }
  return message_;
}

}  // namespace hvdtune
