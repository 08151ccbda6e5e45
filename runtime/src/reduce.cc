#include "reduce.h"

#include <algorithm>

#include "hvdtune/half.h"

namespace hvdtune {
namespace {

template <typename T>
void ReduceTyped(T* dst, const T* src, std::int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      for (std::int64_t i = 0; i < n; ++i) dst[i] = dst[i] + src[i];
      break;
    case ReduceOp::kMin:
      for (std::int64_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]);
      break;
    case ReduceOp::kMax:
      for (std::int64_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
      break;
  }
}

// Half types: convert to float, reduce, round back to nearest even.
template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void ReduceHalf(std::uint16_t* dst, const std::uint16_t* src, std::int64_t n,
                ReduceOp op) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = ToFloat(dst[i]);
    const float b = ToFloat(src[i]);
    float r;
    switch (op) {
      case ReduceOp::kMin:
        r = std::min(a, b);
        break;
      case ReduceOp::kMax:
        r = std::max(a, b);
        break;
      default:
        r = a + b;
        break;
    }
    dst[i] = FromFloat(r);
  }
}

template <typename T>
void DivideTyped(T* buf, std::int64_t n, int divisor) {
  const T d = static_cast<T>(divisor);
  for (std::int64_t i = 0; i < n; ++i) buf[i] = static_cast<T>(buf[i] / d);
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void DivideHalf(std::uint16_t* buf, std::int64_t n, int divisor) {
  const float d = static_cast<float>(divisor);
  for (std::int64_t i = 0; i < n; ++i) buf[i] = FromFloat(ToFloat(buf[i]) / d);
}

}  // namespace

void ReduceInto(void* dst, const void* src, std::int64_t count, DataType dtype,
                ReduceOp op) {
  switch (dtype) {
    case DataType::kUInt8:
      ReduceTyped(static_cast<std::uint8_t*>(dst),
                  static_cast<const std::uint8_t*>(src), count, op);
      break;
    case DataType::kInt32:
      ReduceTyped(static_cast<std::int32_t*>(dst),
                  static_cast<const std::int32_t*>(src), count, op);
      break;
    case DataType::kInt64:
      ReduceTyped(static_cast<std::int64_t*>(dst),
                  static_cast<const std::int64_t*>(src), count, op);
      break;
    case DataType::kFloat16:
      ReduceHalf<HalfToFloat, FloatToHalf>(
          static_cast<std::uint16_t*>(dst),
          static_cast<const std::uint16_t*>(src), count, op);
      break;
    case DataType::kBFloat16:
      ReduceHalf<BFloat16ToFloat, FloatToBFloat16>(
          static_cast<std::uint16_t*>(dst),
          static_cast<const std::uint16_t*>(src), count, op);
      break;
    case DataType::kFloat32:
      ReduceTyped(static_cast<float*>(dst), static_cast<const float*>(src),
                  count, op);
      break;
    case DataType::kFloat64:
      ReduceTyped(static_cast<double*>(dst), static_cast<const double*>(src),
                  count, op);
      break;
  }
}

void DivideBy(void* buf, std::int64_t count, DataType dtype, int divisor) {
  switch (dtype) {
    case DataType::kUInt8:
      DivideTyped(static_cast<std::uint8_t*>(buf), count, divisor);
      break;
    case DataType::kInt32:
      DivideTyped(static_cast<std::int32_t*>(buf), count, divisor);
      break;
    case DataType::kInt64:
      DivideTyped(static_cast<std::int64_t*>(buf), count, divisor);
      break;
    case DataType::kFloat16:
      DivideHalf<HalfToFloat, FloatToHalf>(static_cast<std::uint16_t*>(buf),
                                           count, divisor);
      break;
    case DataType::kBFloat16:
      DivideHalf<BFloat16ToFloat, FloatToBFloat16>(
          static_cast<std::uint16_t*>(buf), count, divisor);
      break;
    case DataType::kFloat32:
      DivideTyped(static_cast<float*>(buf), count, divisor);
      break;
    case DataType::kFloat64:
      DivideTyped(static_cast<double*>(buf), count, divisor);
      break;
  }
}

}  // namespace hvdtune
