// MakeGlooEngine in a build without Gloo (HVDTUNE_HAVE_GLOO == 0).
#include "core/engine/gloo/gloo_engine.h"

namespace hvdtune::internal {

std::unique_ptr<Engine> MakeGlooEngine(const RuntimeConfig&) {
  throw ConfigError(
      "HOROVOD_GLOO / HOROVOD_CONTROLLER=gloo: this hvdtune was built without "
      "Gloo (install libgloo-dev and configure with HVDTUNE_WITH_GLOO=AUTO "
      "or ON)");
}

}  // namespace hvdtune::internal
