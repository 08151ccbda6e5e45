// The config store's export format: one JSON document with a schema
// version, every pair's fingerprint parts, runs, samples and best
// configuration, knob values by the knob table's names and JSON types.
// ParseExport validates everything before anything is written, so an import
// either applies a whole valid file or nothing.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"
#include "hvdtune/store/store.h"

namespace hvdtune::cli {

inline constexpr int kExportSchemaVersion = 1;
inline constexpr std::string_view kExportFormat = "hvdtune-store-export";

/// A file that is not a valid export. The message starts with the JSON
/// path of the field at fault, e.g. "pairs[0].runs[1].samples[3].knobs.
/// cycle_time: 0 is outside (0, 10000]".
class ImportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The export document for `pairs` (Store::Dump()).
Json ExportDocument(const std::vector<store::PairRecord>& pairs,
                    double exported_at);

/// Parses and validates an export document: unknown knobs and fields, values
/// outside the knob table's ranges, wrong JSON types, a fingerprint that does
/// not match its parts, a newer schema version. Throws ImportError.
std::vector<store::PairRecord> ParseExport(std::string_view text);

}  // namespace hvdtune::cli
