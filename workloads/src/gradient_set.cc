#include "hvdtune/workloads/gradient_set.h"

#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "hvdtune/half.h"
#include "hvdtune/workloads/mpi_session.h"

namespace hvdtune::workloads {

std::string IndexedName(std::string_view prefix, std::int64_t index) {
  std::string name(prefix);
  name += std::to_string(index);
  return name;
}

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

// An input or expected output value in a tensor's dtype.
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

// Row k's part of every rank's input (small integers: exact in float16 after
// a sum over ranks), so that a row in the wrong place is seen.
float RowPattern(std::int64_t k) { return static_cast<float>(8 * (k % 8)); }

}  // namespace

std::string_view CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce:
      return "allreduce";
    case Collective::kReducescatter:
      return "reducescatter";
    case Collective::kAlltoall:
      return "alltoall";
  }
  return "";
}

GradientSet::GradientSet(const std::string& prefix,
                         std::vector<TensorSpec> tensors, Collective collective,
                         int rank, int size)
    : tensors_(std::move(tensors)),
      collective_(collective),
      rank_(rank),
      ranks_(size) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw std::runtime_error(prefix + ": bad rank " + std::to_string(rank) +
                             " of " + std::to_string(size));
  }
  std::int64_t out_bytes = 0;
  for (TensorSpec& t : tensors_) {
    if (t.dtype != DataType::kFloat32 && t.dtype != DataType::kFloat16) {
      throw std::runtime_error(t.name + ": only float32 and float16 sets");
    }
    const auto esize = static_cast<std::int64_t>(DataTypeSize(t.dtype));
    t.name = prefix + "." + t.name;
    offsets_.push_back(total_bytes_);
    out_offsets_.push_back(out_bytes);
    shapes_.push_back({t.count});
    if (collective_ == Collective::kAlltoall) {
      std::vector<std::int64_t> splits;
      for (int r = 0; r < ranks_; ++r) splits.push_back(RowsOf(t.count, r));
      splits_.push_back(std::move(splits));
    }
    total_ += t.count;
    total_bytes_ += t.count * esize;
    out_bytes +=
        (collective_ == Collective::kReducescatter ? RowsOf(t.count, rank_)
                                                   : t.count) *
        esize;
    single_dtype_ = single_dtype_ && t.dtype == DataType::kFloat32;
  }
  if (total_ > std::numeric_limits<int>::max()) {
    throw std::runtime_error(prefix +
                             ": more elements than one MPI_Allreduce takes");
  }
  handles_.resize(tensors_.size());
  input_.assign(static_cast<std::size_t>(total_bytes_), 0);
  // Room for the raw collectives too (all of the set's bytes).
  output_.assign(static_cast<std::size_t>(std::max(out_bytes, total_bytes_)),
                 0);
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const std::size_t esize = DataTypeSize(tensors_[i].dtype);
    for (std::int64_t k = 0; k < tensors_[i].count; ++k) {
      StoreValue(
          tensors_[i].dtype,
          input_.data() + offsets_[i] + static_cast<std::size_t>(k) * esize,
          static_cast<float>(rank_ + 1) + RowPattern(k));
    }
  }
}

std::int64_t GradientSet::RowsOf(std::int64_t count, int r) const {
  return count / ranks_ + (r < count % ranks_ ? 1 : 0);
}

void GradientSet::Step(Runtime& runtime) {
  for (std::size_t i = tensors_.size(); i-- > 0;) {
    const TensorSpec& t = tensors_[i];
    switch (collective_) {
      case Collective::kAllreduce:
        handles_[i] = runtime.Allreduce(t.name, &input_[offsets_[i]],
                                        &output_[offsets_[i]], shapes_[i],
                                        t.dtype, ReduceOp::kSum);
        break;
      case Collective::kReducescatter:
        handles_[i] = runtime.Reducescatter(t.name, &input_[offsets_[i]],
                                            shapes_[i], t.dtype, ReduceOp::kSum,
                                            &output_[out_offsets_[i]]);
        break;
      case Collective::kAlltoall:
        handles_[i] = runtime.Alltoall(t.name, &input_[offsets_[i]], shapes_[i],
                                       t.dtype, splits_[i]);
        break;
    }
  }
  for (std::size_t i = tensors_.size(); i-- > 0;) {
    WaitOk(handles_[i], tensors_[i].name);
  }
}

void GradientSet::RawCollective() {
  if (!single_dtype_) {
    throw std::runtime_error("a raw MPI collective needs a float32-only set");
  }
  const int block = static_cast<int>(total_ / ranks_);
  switch (collective_) {
    case Collective::kAllreduce:
      MPI_Allreduce(input_.data(), output_.data(), static_cast<int>(total_),
                    MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case Collective::kReducescatter:
      MPI_Reduce_scatter_block(input_.data(), output_.data(), block, MPI_FLOAT,
                               MPI_SUM, MPI_COMM_WORLD);
      break;
    case Collective::kAlltoall:
      // block elements to every rank: all of the set's bytes, as the
      // runtime's alltoall of every tensor sends them.
      MPI_Alltoall(input_.data(), block, MPI_FLOAT, output_.data(), block,
                   MPI_FLOAT, MPI_COMM_WORLD);
      break;
  }
}

void GradientSet::RawAllreduceWithCopies() {
  if (!single_dtype_ || collective_ != Collective::kAllreduce) {
    throw std::runtime_error(
        "raw allreduce with copies needs a float32-only allreduce set");
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

std::string GradientSet::CheckValues(std::size_t i, const std::uint8_t* data,
                                     std::int64_t count, float base,
                                     float pattern_weight,
                                     std::int64_t first_row,
                                     std::int64_t first_element) const {
  const DataType dtype = tensors_[i].dtype;
  const std::size_t esize = DataTypeSize(dtype);
  for (std::int64_t k = 0; k < count; ++k) {
    const float got =
        LoadValue(dtype, data + static_cast<std::size_t>(k) * esize);
    const float want = base + pattern_weight * RowPattern(first_row + k);
    if (got != want) {
      return tensors_[i].name + " element " +
             std::to_string(first_element + k) + ": " + std::to_string(got) +
             ", expected " + std::to_string(want);
    }
  }
  return "";
}

std::string GradientSet::CheckOutput() const {
  const auto sum = static_cast<float>(ranks_ * (ranks_ + 1) / 2);
  const auto n = static_cast<float>(ranks_);
  // The first of this rank's rows in every tensor (Horovod's split).
  auto first_row_of = [&](std::int64_t count) {
    std::int64_t row = 0;
    for (int r = 0; r < rank_; ++r) row += RowsOf(count, r);
    return row;
  };
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const TensorSpec& t = tensors_[i];
    std::string error;
    switch (collective_) {
      case Collective::kAllreduce:
        error = CheckValues(i, &output_[offsets_[i]], t.count, sum, n, 0, 0);
        break;
      case Collective::kReducescatter:
        error =
            CheckValues(i, &output_[out_offsets_[i]], RowsOf(t.count, rank_),
                        sum, n, first_row_of(t.count), 0);
        if (error.empty() &&
            handles_[i].output_shape() !=
                std::vector<std::int64_t>{RowsOf(t.count, rank_)}) {
          error = t.name + ": wrong output shape";
        }
        break;
      case Collective::kAlltoall: {
        const std::vector<std::uint8_t>& out = handles_[i].output();
        const std::vector<std::int64_t>& received =
            handles_[i].received_splits();
        const std::size_t esize = DataTypeSize(t.dtype);
        std::vector<std::int64_t> expected;
        for (int s = 0; s < ranks_; ++s) {
          expected.push_back(RowsOf(t.count, rank_));
        }
        if (received != expected ||
            out.size() !=
                static_cast<std::size_t>(RowsOf(t.count, rank_) * ranks_) *
                    esize) {
          error = t.name + ": received the wrong number of rows";
          break;
        }
        std::int64_t row = 0;
        for (int s = 0; s < ranks_ && error.empty(); ++s) {
          error = CheckValues(
              i, out.data() + static_cast<std::size_t>(row) * esize,
              received[static_cast<std::size_t>(s)], static_cast<float>(s + 1),
              1.0f, first_row_of(t.count), row);
          row += received[static_cast<std::size_t>(s)];
        }
        break;
      }
    }
    if (!error.empty()) return error;
  }
  return "";
}

void GradientSet::ClearOutput() {
  std::fill(output_.begin(), output_.end(), std::uint8_t{0});
}

}  // namespace hvdtune::workloads
