// The arithmetic that stands in for a layer's backward computation.
#pragma once

#include <cstdint>

namespace hvdtune::workloads {

/// `fmas` multiply-adds over the cache-resident buffer `x` of `width`
/// floats, `width` at a time. Out of line, so that its speed does not
/// depend on where its callers land in the binary.
[[gnu::noinline]] void SyntheticArithmetic(float* x, std::int64_t width,
                                           std::int64_t fmas);

}  // namespace hvdtune::workloads
