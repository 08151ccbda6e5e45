#include "core/reduce.h"

#include <algorithm>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

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
    case ReduceOp::kProduct:
      for (std::int64_t i = 0; i < n; ++i) {
        dst[i] = static_cast<T>(dst[i] * src[i]);
      }
      break;
  }
}

// Bools are never reduced through the API; should a kernel meet them, the
// result stays 0 or 1: sum and max are "or", product and min "and".
void ReduceBool(std::uint8_t* dst, const std::uint8_t* src, std::int64_t n,
                ReduceOp op) {
  const bool any = op != ReduceOp::kMin && op != ReduceOp::kProduct;
  for (std::int64_t i = 0; i < n; ++i) {
    dst[i] = any ? (dst[i] | src[i]) != 0 : (dst[i] & src[i]) != 0;
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
      case ReduceOp::kProduct:
        r = a * b;
        break;
      default:
        r = a + b;
        break;
    }
    dst[i] = FromFloat(r);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// float16 with the F16C conversion instructions, 8 lanes at a time (same
// rounding as the scalar path: to nearest even). Chosen at run time, so the
// build needs no -mf16c.
#define HVDTUNE_HAVE_F16C_PATH 1
__attribute__((target("avx,f16c"))) void ReduceHalfF16c(
    std::uint16_t* dst, const std::uint16_t* src, std::int64_t n, ReduceOp op) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(dst + i)));
    const __m256 b = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    __m256 r;
    switch (op) {
      case ReduceOp::kMin:
        r = _mm256_min_ps(a, b);
        break;
      case ReduceOp::kMax:
        r = _mm256_max_ps(a, b);
        break;
      case ReduceOp::kProduct:
        r = _mm256_mul_ps(a, b);
        break;
      default:
        r = _mm256_add_ps(a, b);
        break;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
  }
  ReduceHalf<HalfToFloat, FloatToHalf>(dst + i, src + i, n - i, op);
}

bool HaveF16c() {
  static const bool have =
      __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return have;
}
#endif

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
#ifdef HVDTUNE_HAVE_F16C_PATH
      // min/max of NaNs differ between std::min and _mm256_min_ps; those
      // keep the scalar path so results never depend on the CPU.
      if (op != ReduceOp::kMin && op != ReduceOp::kMax && HaveF16c()) {
        ReduceHalfF16c(static_cast<std::uint16_t*>(dst),
                       static_cast<const std::uint16_t*>(src), count, op);
        break;
      }
#endif
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
    case DataType::kInt8:
      ReduceTyped(static_cast<std::int8_t*>(dst),
                  static_cast<const std::int8_t*>(src), count, op);
      break;
    case DataType::kInt16:
      ReduceTyped(static_cast<std::int16_t*>(dst),
                  static_cast<const std::int16_t*>(src), count, op);
      break;
    case DataType::kBool:
      ReduceBool(static_cast<std::uint8_t*>(dst),
                 static_cast<const std::uint8_t*>(src), count, op);
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
    case DataType::kInt8:
      DivideTyped(static_cast<std::int8_t*>(buf), count, divisor);
      break;
    case DataType::kInt16:
      DivideTyped(static_cast<std::int16_t*>(buf), count, divisor);
      break;
    case DataType::kBool:
      break;  // never averaged (refused at enqueue)
  }
}

namespace {

template <typename T>
void FillTyped(void* buf, std::int64_t n, ReduceOp op) {
  T v{};
  if (op == ReduceOp::kProduct) {
    v = T{1};
  } else if (op == ReduceOp::kMin) {
    v = std::numeric_limits<T>::has_infinity
            ? std::numeric_limits<T>::infinity()
            : std::numeric_limits<T>::max();
  } else if (op == ReduceOp::kMax) {
    v = std::numeric_limits<T>::has_infinity
            ? -std::numeric_limits<T>::infinity()
            : std::numeric_limits<T>::lowest();
  }
  std::fill_n(static_cast<T*>(buf), n, v);
}

}  // namespace

void FillNeutral(void* buf, std::int64_t count, DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kBool:
      FillTyped<std::uint8_t>(buf, count, op);
      break;
    case DataType::kInt8:
      FillTyped<std::int8_t>(buf, count, op);
      break;
    case DataType::kInt16:
      FillTyped<std::int16_t>(buf, count, op);
      break;
    case DataType::kInt32:
      FillTyped<std::int32_t>(buf, count, op);
      break;
    case DataType::kInt64:
      FillTyped<std::int64_t>(buf, count, op);
      break;
    case DataType::kFloat32:
      FillTyped<float>(buf, count, op);
      break;
    case DataType::kFloat64:
      FillTyped<double>(buf, count, op);
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const bool half = dtype == DataType::kFloat16;
      float f = 0;
      if (op == ReduceOp::kProduct) f = 1;
      if (op == ReduceOp::kMin) f = std::numeric_limits<float>::infinity();
      if (op == ReduceOp::kMax) f = -std::numeric_limits<float>::infinity();
      const std::uint16_t bits = half ? FloatToHalf(f) : FloatToBFloat16(f);
      std::fill_n(static_cast<std::uint16_t*>(buf), count, bits);
      break;
    }
  }
}

}  // namespace hvdtune
