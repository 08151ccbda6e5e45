#include "gradient_set.h"

#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "bench_common.h"
#include "hvdtune/half.h"

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

namespace {

// 1.0 (inputs) and `value` (expected outputs) in a tensor's dtype.
void StoreValue(DataType dtype, std::uint8_t* at, float value) {
  if (dtype == DataType::kFloat16) {
    const std::uint16_t h = FloatToHalf(value);
    std::memcpy(at, &h, sizeof h);
  } else {
    std::memcpy(at, &value, sizeof value);
  }
}

float LoadValue(DataType dtype, const std::uint8_t* at) {
  if (dtype == DataType::kFloat16) {
    std::uint16_t h;
    std::memcpy(&h, at, sizeof h);
    return HalfToFloat(h);
  }
  float f;
  std::memcpy(&f, at, sizeof f);
  return f;
}

}  // namespace

GradientSet::GradientSet(const std::string& prefix,
                         std::vector<TensorSpec> tensors)
    : tensors_(std::move(tensors)) {
  for (TensorSpec& t : tensors_) {
    if (t.dtype != DataType::kFloat32 && t.dtype != DataType::kFloat16) {
      throw std::runtime_error(t.name + ": only float32 and float16 sets");
    }
    t.name = prefix + "." + t.name;
    offsets_.push_back(total_bytes_);
    shapes_.push_back({t.count});
    total_ += t.count;
    total_bytes_ += t.count * static_cast<std::int64_t>(DataTypeSize(t.dtype));
    single_dtype_ = single_dtype_ && t.dtype == DataType::kFloat32;
  }
  if (total_ > std::numeric_limits<int>::max()) {
    throw std::runtime_error(prefix +
                             ": more elements than one MPI_Allreduce takes");
  }
  handles_.resize(tensors_.size());
  input_.assign(static_cast<std::size_t>(total_bytes_), 0);
  output_.assign(static_cast<std::size_t>(total_bytes_), 0);
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const std::size_t esize = DataTypeSize(tensors_[i].dtype);
    for (std::int64_t k = 0; k < tensors_[i].count; ++k) {
      StoreValue(
          tensors_[i].dtype,
          input_.data() + offsets_[i] + static_cast<std::size_t>(k) * esize,
          1.0f);
    }
  }
}

void GradientSet::Step(Runtime& runtime) {
  for (std::size_t i = tensors_.size(); i-- > 0;) {
    handles_[i] = runtime.Allreduce(tensors_[i].name, &input_[offsets_[i]],
                                    &output_[offsets_[i]], shapes_[i],
                                    tensors_[i].dtype, ReduceOp::kSum);
  }
  for (std::size_t i = tensors_.size(); i-- > 0;) {
    WaitOk(handles_[i], tensors_[i].name);
  }
}

void GradientSet::RawAllreduce() {
  if (!single_dtype_) {
    throw std::runtime_error("a raw MPI_Allreduce needs a float32-only set");
  }
  MPI_Allreduce(input_.data(), output_.data(), static_cast<int>(total_),
                MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

void GradientSet::RawAllreduceWithCopies() {
  if (!single_dtype_) {
    throw std::runtime_error("a raw MPI_Allreduce needs a float32-only set");
  }
  staging_.resize(static_cast<std::size_t>(total_bytes_));
  for (std::size_t i = tensors_.size(); i-- > 0;) {
    std::memcpy(&staging_[offsets_[i]], &input_[offsets_[i]],
                static_cast<std::size_t>(tensors_[i].count) * sizeof(float));
  }
  MPI_Allreduce(MPI_IN_PLACE, staging_.data(), static_cast<int>(total_),
                MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (std::size_t i = tensors_.size(); i-- > 0;) {
    std::memcpy(&output_[offsets_[i]], &staging_[offsets_[i]],
                static_cast<std::size_t>(tensors_[i].count) * sizeof(float));
  }
}

bool GradientSet::CheckOutput(int ranks) const {
  const float want = static_cast<float>(ranks);
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const std::size_t esize = DataTypeSize(tensors_[i].dtype);
    const std::uint8_t* first = output_.data() + offsets_[i];
    const std::uint8_t* last =
        first + static_cast<std::size_t>(tensors_[i].count - 1) * esize;
    if (LoadValue(tensors_[i].dtype, first) != want ||
        LoadValue(tensors_[i].dtype, last) != want) {
      return false;
    }
  }
  return true;
}

void GradientSet::ClearOutput() {
  std::fill(output_.begin(), output_.end(), std::uint8_t{0});
}

}  // namespace hvdtune::bench
