#include "fingerprint_util.h"

#include <algorithm>
#include <filesystem>

#include "common.h"
#include "hvdtune/store_mapping.h"
#include "hvdtune/types.h"
#include "hvdtune/workloads/builtin.h"

namespace hvdtune::cli {

store::Fingerprint ThisHardware(int world_size, int ranks_per_node, int nodes) {
  return JobHardwareFingerprint(world_size, ranks_per_node, nodes);
}

std::vector<workloads::TensorSpec> LoadWorkload(const std::string& workload,
                                                const std::string& tensors_file,
                                                double scale) {
  std::vector<workloads::TensorSpec> tensors;
  try {
    if (!tensors_file.empty()) {
      if (!workload.empty()) {
        throw UsageError("--tensors: cannot be combined with --workload");
      }
      if (!std::filesystem::is_regular_file(tensors_file)) {
        throw UsageError("--tensors: no such file '" + tensors_file + "'");
      }
      tensors = workloads::LoadShapesFile(tensors_file);
    } else {
      tensors = workloads::LoadBuiltinWorkload(
          "--workload", workload.empty() ? "many-small" : workload,
          workloads::DefaultShapesDir());
    }
  } catch (const workloads::UsageError& e) {
    throw UsageError(e.what());
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError(
        std::string(tensors_file.empty() ? "--workload: " : "--tensors: ") +
        e.what());
  }
  if (tensors.empty()) {
    throw UsageError(tensors_file.empty() ? "--workload: no tensors"
                                          : "--tensors: '" + tensors_file +
                                                "' lists no tensors");
  }
  workloads::ScaleTensors(tensors, scale);
  return tensors;
}

store::Fingerprint WorkloadModelFingerprint(
    const std::vector<workloads::TensorSpec>& tensors) {
  std::vector<StepTensor> step;
  step.reserve(tensors.size());
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) {
    step.push_back({it->dtype, it->count * static_cast<std::int64_t>(
                                               DataTypeSize(it->dtype))});
  }
  return StepModelFingerprint(step);
}

store::PairSummary FindWorkloadPair(store::Store& db,
                                    const std::string& workload,
                                    const std::string& tensors_file,
                                    double scale, int np) {
  const store::Fingerprint model =
      WorkloadModelFingerprint(LoadWorkload(workload, tensors_file, scale));
  const store::Fingerprint here = ThisHardware(1, 1, 1);
  const std::string what =
      tensors_file.empty() ? "workload " + workload : "tensors " + tensors_file;
  std::vector<store::PairSummary> found;
  for (store::PairSummary& p : db.ListPairs()) {
    if (p.model_fp.Hash() != model.Hash()) continue;
    if (store::HardwareSimilarity(here, p.hardware_fp) <= 0) continue;
    if (np > 0 && p.hardware_fp.Get("world_size") != std::to_string(np)) {
      continue;
    }
    found.push_back(std::move(p));
  }
  if (found.empty()) {
    throw Failure("nothing stored in " + db.path() + " for " + what +
                  " on this machine" +
                  (np > 0 ? " with " + std::to_string(np) + " ranks" : "") +
                  " (model " + model.Hash() + "); run `hvd-tune sweep` first");
  }
  if (found.size() > 1) {
    std::string sizes;
    for (const auto& p : found) sizes += " " + p.hardware_fp.Get("world_size");
    throw UsageError("--np: " + what +
                     " is stored for several layouts (ranks:" + sizes +
                     "); give --np");
  }
  return found.front();
}

}  // namespace hvdtune::cli
