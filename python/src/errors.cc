// HvdtuneError: the runtime's status codes as a Python exception.
#include "errors.h"

namespace py = pybind11;

namespace hvdtune::python {
namespace {

PyObject* g_error_type = nullptr;
// HvdtuneError and ValueError at once: bad arguments (a duplicate name in
// flight, an unsupported dtype) are what Python code expects as ValueError.
PyObject* g_value_error_type = nullptr;

std::string_view CodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInProgress:
      return "in_progress";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kMismatch:
      return "mismatch";
    case StatusCode::kAborted:
      return "aborted";
    case StatusCode::kInternal:
      return "internal";
    case StatusCode::kStalled:
      return "stalled";
  }
  return "internal";
}

}  // namespace

py::object CreateErrorType() {
  g_error_type = PyErr_NewExceptionWithDoc(
      "hvdtune.HvdtuneError",
      "An error reported by the hvdtune runtime; `code` names its kind.",
      PyExc_RuntimeError, nullptr);
  py::tuple bases =
      py::make_tuple(py::reinterpret_borrow<py::object>(g_error_type),
                     py::reinterpret_borrow<py::object>(PyExc_ValueError));
  g_value_error_type = PyErr_NewExceptionWithDoc(
      "hvdtune.InvalidArgumentError",
      "HvdtuneError with code \"invalid_argument\"; also a ValueError.",
      bases.ptr(), nullptr);
  return py::reinterpret_borrow<py::object>(g_error_type);
}

py::object InvalidArgumentErrorType() {
  return py::reinterpret_borrow<py::object>(g_value_error_type);
}

[[noreturn]] void Raise(std::string_view code, const std::string& message) {
  PyObject* raw =
      code == "invalid_argument" ? g_value_error_type : g_error_type;
  py::object type = py::reinterpret_borrow<py::object>(raw);
  py::object error = type(message);
  error.attr("code") = py::str(std::string(code));
  PyErr_SetObject(raw, error.ptr());
  throw py::error_already_set();
}

void RaiseStatus(const Status& status) {
  if (!status.ok()) Raise(CodeName(status.code()), status.ToString());
}

}  // namespace hvdtune::python
