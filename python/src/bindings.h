// The parts of the module hvdtune._core, one translation unit each, by area;
// core_module.cc calls them in this order.
#pragma once

#include <pybind11/pybind11.h>

namespace hvdtune::python {

/// Handle, GatherResult and the collectives (*_async), the reduce ops,
/// split_into_groups, pending_orphans (collectives.cc).
void BindCollectives(pybind11::module_& m);

/// init, shutdown and process sets; the job's ranks, engine and NCCL;
/// runtime_ref for hvdtune._c10d; RendezvousServer (lifecycle.cc).
void BindLifecycle(pybind11::module_& m);

/// The autotuner's status, the knobs, the runtime's statistics, the timeline
/// and step marks (tuning.cc).
void BindTuning(pybind11::module_& m);

/// Raw MPI on MPI_COMM_WORLD beside the runtime, and abort (raw_mpi.cc).
void BindMpi(pybind11::module_& m);

}  // namespace hvdtune::python
