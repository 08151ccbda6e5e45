#include "hvdtune/workloads/builtin.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "hvdtune/workloads/usage_error.h"

// HVDTUNE_WORKLOADS_DATA_DIR and HVDTUNE_WORKLOADS_INSTALLED_DATA_DIR come
// from workloads/CMakeLists.txt.

namespace hvdtune::workloads {
std::string DefaultShapesDir() {
  const std::filesystem::path source_tree = HVDTUNE_WORKLOADS_DATA_DIR;
  return std::filesystem::is_directory(source_tree)
             ? source_tree.string()
             : std::string(HVDTUNE_WORKLOADS_INSTALLED_DATA_DIR);
}

std::vector<TensorSpec> ManySmallTensors(std::string_view flag,
                                         std::int64_t count) {
  if (count < 1 || count > kManySmallElements) {
    throw UsageError(fmt::format("{}: {} tensors (expected 1 to {})", flag,
                                 count, kManySmallElements));
  }
  std::vector<TensorSpec> tensors;
  tensors.reserve(static_cast<std::size_t>(count));
  const std::int64_t each = kManySmallElements / count;
  const std::int64_t extra = kManySmallElements % count;
  for (std::int64_t i = 0; i < count; ++i) {
    tensors.push_back({IndexedName("small", i), each + (i < extra ? 1 : 0)});
  }
  return tensors;
}

std::vector<TensorSpec> LoadBuiltinWorkload(std::string_view flag,
                                            std::string_view name,
                                            const std::string& shapes_dir) {
  if (std::find(kWorkloadNames.begin(), kWorkloadNames.end(), name) ==
      kWorkloadNames.end()) {
    throw UsageError(
        fmt::format("{}: unknown workload '{}' (expected one of {})", flag,
                    name, fmt::join(kWorkloadNames, ", ")));
  }
  if (name == "many-small") return ManySmallTensors(flag, 1000);
  if (name == "mixed-precision") {
    std::vector<TensorSpec> tensors = LoadShapesFile(
        (std::filesystem::path(shapes_dir) / "resnet50.txt").string());
    for (TensorSpec& t : tensors) {
      const bool keep_fp32 = t.name.find("bn") != std::string::npos ||
                             t.name.find("downsample.1") != std::string::npos ||
                             t.name.ends_with(".bias");
      t.dtype = keep_fp32 ? DataType::kFloat32 : DataType::kFloat16;
    }
    return tensors;
  }
  // The data files use underscores ("bert_base.txt").
  std::string file(name);
  std::replace(file.begin(), file.end(), '-', '_');
  return LoadShapesFile(
      (std::filesystem::path(shapes_dir) / (file + ".txt")).string());
}

}  // namespace hvdtune::workloads
