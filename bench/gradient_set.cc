#include "gradient_set.h"

#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "bench_common.h"

namespace hvdtune::bench {

std::vector<TensorSpec> LoadShapesFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open shapes file " + path);
  std::vector<TensorSpec> tensors;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    std::istringstream fields(line);
    TensorSpec spec;
    if (!(fields >> spec.name) || spec.name.starts_with('#')) continue;
    for (std::string dim; fields >> dim;) {
      std::int64_t value = 0;
      const char* end = dim.data() + dim.size();
      const auto [ptr, ec] = std::from_chars(dim.data(), end, value);
      if (ec != std::errc() || ptr != end || value <= 0 ||
          spec.count > (std::int64_t{1} << 40) / value) {
        throw std::runtime_error(path + ":" + std::to_string(line_no) +
                                 ": bad dimension '" + dim + "' of " +
                                 spec.name);
      }
      spec.count *= value;
    }
    tensors.push_back(std::move(spec));
  }
  if (tensors.empty()) throw std::runtime_error(path + ": no tensors");
  return tensors;
}

void ScaleTensors(std::vector<TensorSpec>& tensors, double scale) {
  for (TensorSpec& t : tensors) {
    t.count = std::max<std::int64_t>(
        1, std::llround(static_cast<double>(t.count) * scale));
  }
}

GradientSet::GradientSet(const std::string& prefix,
                         std::vector<TensorSpec> tensors)
    : tensors_(std::move(tensors)) {
  for (TensorSpec& t : tensors_) {
    t.name = prefix + "." + t.name;
    offsets_.push_back(total_);
    shapes_.push_back({t.count});
    total_ += t.count;
  }
  if (total_ > std::numeric_limits<int>::max()) {
    throw std::runtime_error(prefix +
                             ": more elements than one MPI_Allreduce takes");
  }
  handles_.resize(tensors_.size());
  input_.assign(static_cast<std::size_t>(total_), 1.0f);
  output_.assign(static_cast<std::size_t>(total_), 0.0f);
}

void GradientSet::Step(Runtime& runtime) {
  for (std::size_t i = tensors_.size(); i-- > 0;) {
    handles_[i] = runtime.Allreduce(tensors_[i].name, &input_[offsets_[i]],
                                    &output_[offsets_[i]], shapes_[i],
                                    DataType::kFloat32, ReduceOp::kSum);
  }
  for (std::size_t i = tensors_.size(); i-- > 0;) {
    WaitOk(handles_[i], tensors_[i].name);
  }
}

void GradientSet::RawAllreduce() {
  MPI_Allreduce(input_.data(), output_.data(), static_cast<int>(total_),
                MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

bool GradientSet::CheckOutput(int ranks) const {
  const float want = static_cast<float>(ranks);
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const std::int64_t first = offsets_[i];
    const std::int64_t last = first + tensors_[i].count - 1;
    if (output_[first] != want || output_[last] != want) return false;
  }
  return true;
}

void GradientSet::ClearOutput() {
  std::fill(output_.begin(), output_.end(), 0.0f);
}

}  // namespace hvdtune::bench
