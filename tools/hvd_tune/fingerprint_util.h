// A sweep's fingerprint, built by the runtime's own builders
// (hvdtune/store_mapping.h) so that it is the fingerprint of a job of the
// same shape: this machine's hardware with the job's layout, and the model
// from one step's tensors as they complete.
#pragma once

#include <string>
#include <vector>

#include "hvdtune/store/fingerprint.h"
#include "hvdtune/store/store.h"
#include "hvdtune/workloads/gradient_set.h"

namespace hvdtune::cli {

/// This machine with a job layout, as the runtime fingerprints it.
store::Fingerprint ThisHardware(int world_size, int ranks_per_node, int nodes);

/// The tensors of a synthetic workload (`workload`) or of a tensor-list
/// file (`tensors_file`, `name dim0 dim1 ...` per line), scaled. Throws
/// UsageError naming --workload / --tensors.
std::vector<workloads::TensorSpec> LoadWorkload(const std::string& workload,
                                                const std::string& tensors_file,
                                                double scale);

/// The model fingerprint of a step that enqueues `tensors` last to first
/// (as synthetic_train and the sweep do); every tensor completes in that
/// order.
store::Fingerprint WorkloadModelFingerprint(
    const std::vector<workloads::TensorSpec>& tensors);

/// The stored pair of a workload on this machine: the same model, this
/// machine's hardware, and `np` ranks when given (needed when several
/// layouts are stored). Failure / UsageError otherwise.
store::PairSummary FindWorkloadPair(store::Store& db,
                                    const std::string& workload,
                                    const std::string& tensors_file,
                                    double scale, int np);

}  // namespace hvdtune::cli
