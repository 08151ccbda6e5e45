// HvdtuneError: how the binding reports failures to Python.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <string_view>

#include "hvdtune/status.h"

namespace hvdtune::python {

/// Creates the HvdtuneError class (once, at import) and returns it for the
/// module to export. Its `code` attribute says which kind of failure:
/// "config", "not_initialized", "invalid_argument", "mismatch", "aborted",
/// "internal", "stalled".
pybind11::object CreateErrorType();

/// InvalidArgumentError, the subclass of HvdtuneError (and of ValueError)
/// raised for code "invalid_argument"; valid after CreateErrorType().
pybind11::object InvalidArgumentErrorType();

/// Raises HvdtuneError(message) with `code` (InvalidArgumentError for
/// "invalid_argument").
[[noreturn]] void Raise(std::string_view code, const std::string& message);

/// Raises the runtime's status as HvdtuneError unless it is ok.
void RaiseStatus(const Status& status);

}  // namespace hvdtune::python
