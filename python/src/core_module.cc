// hvdtune._core: the runtime's collectives on Python buffers (numpy arrays,
// anything with the buffer protocol) and torch CPU and CUDA tensors, without
// copies.
//
// One Runtime per process, built by the environment-driven path
// (Runtime(RuntimeOptions{}) = ParseConfig + DefaultServices), so
// HOROVOD_AUTOTUNE, the config store, metrics and the timeline behave as in
// a C++ application. The pure-Python packages hvdtune and hvdtune.torch sit
// on top of this module.

#include <pybind11/pybind11.h>

#include "bindings.h"
#include "errors.h"

namespace py = pybind11;

namespace hvdtune::python {

void DefineModule(py::module_& m) {
  m.doc() = "hvdtune runtime binding (use the hvdtune package)";
  m.attr("HvdtuneError") = CreateErrorType();
  m.attr("InvalidArgumentError") = InvalidArgumentErrorType();
  BindCollectives(m);
  BindLifecycle(m);
  BindTuning(m);
  BindMpi(m);
}

}  // namespace hvdtune::python

PYBIND11_MODULE(_core, m) { hvdtune::python::DefineModule(m); }
