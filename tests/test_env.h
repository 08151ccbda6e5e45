#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "hvdtune/knobs.h"

namespace hvdtune::testing_util {

/// The variables that say which engine this process runs on and where it
/// sits in the job (a Gloo launcher's, or those the multi-rank suites set
/// for their Gloo variants, mpi_main.cc): not settings a test chooses, so
/// MapEnv passes them through from the process environment.
inline bool IsEngineVariable(std::string_view name) {
  return name == "HOROVOD_GLOO" || name == "HOROVOD_CONTROLLER" ||
         name == "HOROVOD_CPU_OPERATIONS" || name == "HOROVOD_RANK" ||
         name == "HOROVOD_SIZE" || name == "HOROVOD_HOSTNAME" ||
         name.starts_with("HOROVOD_GLOO_");
}

/// An environment made of the given variables only (and the engine's, see
/// IsEngineVariable).
inline EnvLookup MapEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](
             std::string_view name) -> std::optional<std::string> {
    const auto it = vars.find(std::string(name));
    if (it != vars.end()) return it->second;
    if (IsEngineVariable(name)) {
      if (const char* v = std::getenv(std::string(name).c_str())) {
        return std::string(v);
      }
    }
    return std::nullopt;
  };
}

}  // namespace hvdtune::testing_util
