// What code that also calls MPI itself (benchmarks, bindings, tools) shares
// with the runtime (hvdtune::core): the runtime's settings for MPI_Init, its
// dtype -> MPI type table, and runtimes on the Gloo engine beside MPI.
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <string>

#include "hvdtune/rendezvous.h"
#include "hvdtune/types.h"

namespace hvdtune {

/// Sets what hvdtune wants from Open MPI before MPI_Init reads its
/// parameters: a thread waiting inside MPI yields its core (the cycle thread
/// waits while the application computes on the same cores). A value the
/// user set is kept; other MPIs ignore it. The runtime calls it before it
/// initialises MPI; code that initialises MPI itself calls it first.
void PrepareMpiInit();

/// The standard MPI type of a dtype, or MPI_DATATYPE_NULL where MPI has
/// none (the 16-bit floats).
MPI_Datatype NativeMpiType(DataType dtype);

/// "Open MPI v4.1.4": MPI_Get_library_version up to the first comma (the
/// rest names a build and a date). Empty when MPI cannot say. The one
/// spelling of the MPI library in fingerprints and metrics.
std::string MpiLibraryVersion();

/// For programs under mpirun whose runtimes run on the Gloo engine beside
/// MPI (the test suites' Gloo variants, benchmarks comparing the engines):
/// rank 0 of MPI_COMM_WORLD serves a rendezvous store on the IPv4 address of
/// its interface `iface` (returned: keep it while such runtimes live; null
/// on the other ranks), and `vars` receives what a Gloo launcher would set
/// for this rank (HOROVOD_GLOO=1, HOROVOD_RANK, HOROVOD_SIZE,
/// HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, HOROVOD_GLOO_IFACE=iface; every node
/// must have an interface of that name). Collective on MPI_COMM_WORLD;
/// throws std::runtime_error on every rank when rank 0's `iface` has no
/// IPv4 address.
std::unique_ptr<RendezvousServer> ServeGlooBesideMpi(
    std::map<std::string, std::string>* vars, const std::string& iface = "lo");

}  // namespace hvdtune
