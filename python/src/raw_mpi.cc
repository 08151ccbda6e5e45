// hvdtune._core's raw MPI beside the runtime, and abort.

#include <mpi.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "bindings.h"
#include "errors.h"
#include "hvdtune/mpi.h"
#include "tensors.h"

namespace py = pybind11;

namespace hvdtune::python {
namespace {

// Raw MPI on MPI_COMM_WORLD, for benchmarks that put the runtime beside
// plain MPI_Allreduce on the same buffers through the same binding. MPI must
// be up (init() brings it up, and it stays up after shutdown()).
void RequireMpi(const char* what) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    Raise("not_initialized",
          std::string(what) + ": MPI is not initialized (call init() once)");
  }
}

void MpiAllreduceSum(py::handle input, py::handle output) {
  RequireMpi("mpi_allreduce_sum");
  TensorRef in = Resolve(input, false, "input of mpi_allreduce_sum");
  TensorRef out = Resolve(output, true, "output of mpi_allreduce_sum");
  CheckSameLayout(in, out, "mpi_allreduce_sum");
  const MPI_Datatype type = hvdtune::NativeMpiType(in.dtype);
  if (type == MPI_DATATYPE_NULL) {
    Raise("invalid_argument", "mpi_allreduce_sum: MPI has no type for " +
                                  std::string(DataTypeName(in.dtype)));
  }
  const std::int64_t count = NumElements(in.shape);
  int rc = MPI_SUCCESS;
  {
    py::gil_scoped_release release;
    rc = MPI_Allreduce(in.data, out.data, static_cast<int>(count), type,
                       MPI_SUM, MPI_COMM_WORLD);
  }
  if (rc != MPI_SUCCESS) Raise("internal", "MPI_Allreduce failed");
}

double MpiMax(double value) {
  RequireMpi("mpi_max");
  double result = 0;
  py::gil_scoped_release release;
  MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return result;
}

// Whether MPI runs with MPI_THREAD_MULTIPLE (what the runtime asks for).
bool MpiThreadsSupported() {
  RequireMpi("mpi_threads_supported");
  int provided = 0;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

void MpiBarrier() {
  RequireMpi("mpi_barrier");
  py::gil_scoped_release release;
  MPI_Barrier(MPI_COMM_WORLD);
}

// Ends every rank of the job at once (an uncaught exception on one rank
// must not leave the others waiting for it).
void Abort(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace

void BindMpi(py::module_& m) {
  m.def("abort", &Abort, py::arg("code") = 1);
  m.def("mpi_allreduce_sum", &MpiAllreduceSum, py::arg("input"),
        py::arg("output"), "Raw MPI_Allreduce (sum) on MPI_COMM_WORLD.");
  m.def("mpi_max", &MpiMax, "Largest `value` over the ranks (raw MPI).");
  m.def("mpi_barrier", &MpiBarrier, "MPI_Barrier on MPI_COMM_WORLD.");
  m.def("mpi_threads_supported", &MpiThreadsSupported,
        "True when MPI was initialised with MPI_THREAD_MULTIPLE.");
}

}  // namespace hvdtune::python
