// How the runtime's data enters the config store, written once for the
// runtime's store sink and for hvd-tune (part of hvdtune::runtime, which
// links the store): knob values <-> stored values (by knob name, typed by
// the knob table), and a job's fingerprints. A sweep and a job of the same
// shape on the same machine must compute the same fingerprint.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hvdtune/knobs.h"
#include "hvdtune/services.h"
#include "hvdtune/store/fingerprint.h"
#include "hvdtune/store/store.h"

namespace hvdtune {

/// A knob value of the table (double) as the store keeps it: an integer,
/// a number, or a categorical knob's choice name.
store::KnobValue ToStoredValue(const KnobSpec& spec, double value);
/// A stored value as the table's double; nullopt (with `why`) when it has
/// the wrong type, an unknown choice, or lies outside the table's range.
std::optional<double> FromStoredValue(const KnobSpec& spec,
                                      const store::KnobValue& value,
                                      std::string* why = nullptr);
/// Every knob of `values` in store form.
store::KnobValues ToStored(const KnobSettings& values);
/// `base` with the known knobs of `values` applied (a knob name this build
/// does not know is ignored); nullopt (with `why`) when a value is invalid
/// or the whole configuration breaks a rule of the table.
std::optional<KnobSettings> FromStored(const store::KnobValues& values,
                                       const KnobSettings& base,
                                       std::string* why = nullptr);

/// This machine (store::ProbeHost) with a job's layout and communication
/// library: `library` (RuntimeInfo::mpi_version: the MPI library, or Gloo's
/// version on the Gloo engine, so that each engine has its own best
/// configurations), or MpiLibraryVersion() when empty.
store::Fingerprint JobHardwareFingerprint(int world_size, int ranks_per_node,
                                          int nodes,
                                          std::string_view library = {});
/// The model of one training step: its tensors in the order they complete.
store::Fingerprint StepModelFingerprint(std::span<const StepTensor> step);

}  // namespace hvdtune
