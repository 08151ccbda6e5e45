// At init, before any collective whose shape depends on the configuration,
// every rank checks that all ranks accepted their configuration and agree
// on everything that must be equal everywhere.
#pragma once

#include <string>

#include "core/engine/engine.h"
#include "hvdtune/config.h"

namespace hvdtune::internal {

/// Collective on the engine's control transport. `local_error` is this rank's
/// configuration error (empty when it parsed). Throws the same ConfigError on
/// every rank when some rank failed or a setting differs, naming the variable
/// and the values as users write them.
void AgreeOnConfig(ControlTransport& control, const RuntimeConfig& config,
                   const std::string& local_error);

/// DefaultAllreduceAlgorithm for the job's node layout. Collective (set-up
/// time, after the node split); every rank gets the same answer.
std::string_view TopologyAllreduceAlgorithm(ControlTransport& control,
                                            const World& world,
                                            EngineKind engine, bool devices);

}  // namespace hvdtune::internal
