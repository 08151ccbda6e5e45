// The one place an engine is chosen and made.
#include "core/engine/engine.h"
#include "core/engine/gloo/gloo_engine.h"
#include "core/engine/mpi_engine.h"

namespace hvdtune::internal {

std::unique_ptr<Engine> MakeEngine(const RuntimeConfig& config) {
  if (config.engine == EngineKind::kGloo) return MakeGlooEngine(config);
  return MakeMpiEngine(config.ranks);
}

}  // namespace hvdtune::internal
