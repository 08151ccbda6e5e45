// At init, before any collective whose shape depends on the configuration,
// every rank checks that all ranks accepted their configuration and agree
// on everything that must be equal everywhere.
#pragma once

#include <mpi.h>

#include <string>

#include "hvdtune/config.h"

namespace hvdtune::internal {

/// Collective on `comm`. `local_error` is this rank's configuration error
/// (empty when it parsed). Throws the same ConfigError on every rank when
/// some rank failed or a setting differs, naming the variable and the
/// values as users write them.
void AgreeOnConfig(MPI_Comm comm, const RuntimeConfig& config,
                   const std::string& local_error);

}  // namespace hvdtune::internal
