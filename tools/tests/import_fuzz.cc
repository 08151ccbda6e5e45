// libFuzzer target: the import parser must turn any bytes into either
// records or an ImportError, never crash, hang or throw anything else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exchange.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  try {
    hvdtune::cli::ParseExport(
        std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const hvdtune::cli::ImportError&) {
  }
  return 0;
}
