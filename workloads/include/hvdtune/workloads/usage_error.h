// The error a program of the workloads (a benchmark, `hvd-tune sweep`)
// reports as bad usage: exit code 2 and its message, printed once.
#pragma once

#include <stdexcept>

namespace hvdtune::workloads {

/// A bad command-line value. The message names the flag.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hvdtune::workloads
