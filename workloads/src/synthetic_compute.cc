#include "hvdtune/workloads/synthetic_compute.h"

#include <algorithm>

namespace hvdtune::workloads {

// Compiled with its function and loops aligned to 64 bytes
// (workloads/CMakeLists.txt): inlined into its callers, the loop's speed
// followed wherever the linker happened to place it, and builds differing only
// in unrelated runtime code ran it at speeds up to 1.7x apart.
void SyntheticArithmetic(float* x, std::int64_t width, std::int64_t fmas) {
  while (fmas > 0) {
    const std::int64_t n = std::min(fmas, width);
    for (std::int64_t k = 0; k < n; ++k) x[k] = x[k] * 0.999f + 0.001f;
    fmas -= n;
  }
  // Keeps the compiler from dropping the arithmetic as unused.
  asm volatile("" : : "r"(x) : "memory");
}

}  // namespace hvdtune::workloads
