// Gradient lists of the synthetic training workloads: real models' parameter
// shapes (bench/data/<model>.txt), many small tensors, or a user's shapes file.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hvdtune/workloads/gradient_set.h"
#include "hvdtune/workloads/usage_error.h"

namespace hvdtune::workloads {

/// Built-in workload names, as --workload accepts them.
inline constexpr std::array<std::string_view, 5> kWorkloadNames = {
    "resnet50", "vgg16", "bert-base", "many-small", "mixed-precision"};

/// The directory holding the model shape files: the source tree's data/
/// when it exists (running from the build tree), else the installed copy.
std::string DefaultShapesDir();

/// The elements of `many-small`: 1,000 tensors of 4 KiB of float32.
inline constexpr std::int64_t kManySmallElements = 1000 * 1024;

/// `many-small`'s kManySmallElements float32 elements split into `count`
/// tensors (named as before; the first ones take one element more where the
/// split is uneven). Throws UsageError naming `flag` unless 1 <= count <=
/// kManySmallElements.
std::vector<TensorSpec> ManySmallTensors(std::string_view flag,
                                         std::int64_t count);

/// The parameter tensors of built-in workload `name`, in forward order
/// (backward produces them last to first). `many-small` is 1,000 tensors of
/// 4 KiB; `mixed-precision` is ResNet-50 trained in half precision with
/// float32 normalisation layers and biases, so float16 and float32 gradients
/// interleave; the models are read from `shapes_dir`. Throws UsageError naming
/// `flag` for an unknown name, std::runtime_error for a bad file.
std::vector<TensorSpec> LoadBuiltinWorkload(std::string_view flag,
                                            std::string_view name,
                                            const std::string& shapes_dir);

}  // namespace hvdtune::workloads
