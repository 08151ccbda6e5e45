// Element-wise reduction kernels on host buffers, used by the MPI user
// operations for half types and by algorithms written on point-to-point.
#pragma once

#include <cstdint>

#include "hvdtune/types.h"

namespace hvdtune {

/// dst[i] = op(dst[i], src[i]) for i < count. kAverage reduces as kSum; the
/// division happens once at the end (DivideBySize).
void ReduceInto(void* dst, const void* src, std::int64_t count, DataType dtype,
                ReduceOp op);

/// buf[i] /= divisor (integers truncate toward zero).
void DivideBy(void* buf, std::int64_t count, DataType dtype, int divisor);

/// Fills `count` elements with the identity of `op`: 0 for sum and average,
/// 1 for product, the largest value (infinity for floats) for min, the
/// smallest for max.
void FillNeutral(void* buf, std::int64_t count, DataType dtype, ReduceOp op);

}  // namespace hvdtune
