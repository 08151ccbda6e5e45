// The runtime's reduction kernels (reduce.h) in the two forms Gloo's
// algorithms take: a function on void pointers (the collectives of
// gloo/allreduce.h and gloo/reduce.h) and a gloo::ReductionFunction<T> over
// the element's storage type (the older algorithm classes: ring_chunked,
// halving_doubling). Exact in every dtype, float16 and bfloat16 included.
#pragma once

#include <gloo/algorithm.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

#include "core/reduce.h"
#include "hvdtune/types.h"

namespace hvdtune::internal {

/// c = a op b (Gloo's contract: c may be a or b; the ops commute).
inline std::function<void(void*, const void*, const void*, std::size_t)>
GlooReduceFunction(DataType dtype, ReduceOp op) {
  const std::size_t esize = DataTypeSize(dtype);
  return
      [dtype, op, esize](void* c, const void* a, const void* b, std::size_t n) {
        const auto count = static_cast<std::int64_t>(n);
        if (c == b) {
          ReduceInto(c, a, count, dtype, op);
          return;
        }
        if (c != a) std::memcpy(c, a, n * esize);
        ReduceInto(c, b, count, dtype, op);
      };
}

namespace gloo_reduce_detail {

template <typename T, DataType D, ReduceOp O>
void Apply(T* x, const T* y, std::size_t n) {
  ReduceInto(x, y, static_cast<std::int64_t>(n), D, O);
}

template <typename T, DataType D, ReduceOp O>
const gloo::ReductionFunction<T>* Static() {
  constexpr gloo::ReductionType kType = O == ReduceOp::kMin   ? gloo::MIN
                                        : O == ReduceOp::kMax ? gloo::MAX
                                        : O == ReduceOp::kProduct
                                            ? gloo::PRODUCT
                                            : gloo::SUM;
  static const gloo::ReductionFunction<T> fn(kType, &Apply<T, D, O>);
  return &fn;
}

template <typename T, DataType D>
const gloo::ReductionFunction<T>* ForOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return Static<T, D, ReduceOp::kMin>();
    case ReduceOp::kMax:
      return Static<T, D, ReduceOp::kMax>();
    case ReduceOp::kProduct:
      return Static<T, D, ReduceOp::kProduct>();
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      break;
  }
  return Static<T, D, ReduceOp::kSum>();
}

}  // namespace gloo_reduce_detail

/// The reduction of `dtype` under `op` on elements stored as T (an unsigned
/// integer of the dtype's size); null when the sizes differ.
template <typename T>
const gloo::ReductionFunction<T>* GlooReductionFunction(DataType dtype,
                                                        ReduceOp op) {
  namespace d = gloo_reduce_detail;
  if (DataTypeSize(dtype) != sizeof(T)) return nullptr;
  switch (dtype) {
    case DataType::kUInt8:
      return d::ForOp<T, DataType::kUInt8>(op);
    case DataType::kInt8:
      return d::ForOp<T, DataType::kInt8>(op);
    case DataType::kBool:
      return d::ForOp<T, DataType::kBool>(op);
    case DataType::kInt16:
      return d::ForOp<T, DataType::kInt16>(op);
    case DataType::kFloat16:
      return d::ForOp<T, DataType::kFloat16>(op);
    case DataType::kBFloat16:
      return d::ForOp<T, DataType::kBFloat16>(op);
    case DataType::kInt32:
      return d::ForOp<T, DataType::kInt32>(op);
    case DataType::kFloat32:
      return d::ForOp<T, DataType::kFloat32>(op);
    case DataType::kInt64:
      return d::ForOp<T, DataType::kInt64>(op);
    case DataType::kFloat64:
      return d::ForOp<T, DataType::kFloat64>(op);
  }
  return nullptr;
}

/// Calls f(T{}) with T the unsigned integer of `esize` bytes (1, 2, 4, 8).
template <typename F>
decltype(auto) WithStorageType(std::size_t esize, F&& f) {
  switch (esize) {
    case 1:
      return f(std::uint8_t{});
    case 2:
      return f(std::uint16_t{});
    case 4:
      return f(std::uint32_t{});
    default:
      return f(std::uint64_t{});
  }
}

}  // namespace hvdtune::internal
