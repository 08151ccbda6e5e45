// The Gloo engine (HOROVOD_GLOO=1, hvd-tune run --gloo): the negotiation and
// the collectives on Gloo's TCP transport, the ranks met through the
// rendezvous store. No MPI call on this path.
#pragma once

#include <memory>

#include "core/engine/engine.h"

namespace hvdtune::internal {

/// Joins the Gloo world of config.gloo over config.ranks. Throws
/// ConfigError.
std::unique_ptr<Engine> MakeGlooEngine(const RuntimeConfig& config);

}  // namespace hvdtune::internal
