#pragma once

#include <map>
#include <optional>
#include <string>

#include "hvdtune/knobs.h"

namespace hvdtune::testing_util {

/// An environment made of the given variables only.
inline EnvLookup MapEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](
             std::string_view name) -> std::optional<std::string> {
    const auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace hvdtune::testing_util
