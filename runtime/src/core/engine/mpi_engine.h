// The MPI engine (the default, under mpirun): the negotiation on its own
// duplicate of the world communicator, the collectives and the runtime's
// algorithms (core/algorithms/) on another, the node groups from
// MPI_Comm_split_type.
#pragma once

#include <memory>
#include <vector>

#include "core/engine/engine.h"

namespace hvdtune::internal {

/// Initialises MPI if needed and makes the communicators over `ranks` of
/// MPI_COMM_WORLD (empty: all). Throws ConfigError.
std::unique_ptr<Engine> MakeMpiEngine(const std::vector<int>& ranks);

}  // namespace hvdtune::internal
