// What code that also calls MPI itself (benchmarks, bindings, tools) shares
// with the runtime (hvdtune::core): the runtime's settings for MPI_Init and
// its dtype -> MPI type table.
#pragma once

#include <mpi.h>

#include <string>

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

}  // namespace hvdtune
