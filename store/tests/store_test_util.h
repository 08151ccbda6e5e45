// Helpers of the store tests: scratch directories and sample records.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "hvdtune/store/store.h"

namespace hvdtune::store::testing {

/// A fresh directory under the test temp dir, removed at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> n{0};
    path_ = std::filesystem::temp_directory_path() /
            ("hvdtune_store_" + std::to_string(getpid()) + "_" +
             std::to_string(n++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const {
    return (path_ / name).string();
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline Sample MakeSample(int index, double score) {
  Sample s;
  s.index = index;
  s.phase = "exploring";
  s.score = score;
  s.time = 1700000000.0 + index;
  s.values["fusion_threshold"] = std::int64_t{64} << 20;
  s.values["cycle_time"] = 1.0 + index * 0.25;
  s.values["allreduce_algorithm"] = std::string("ring");
  return s;
}

inline Fingerprint TestHardware(int world = 4) {
  HostFacts host;
  host.cpu_model = "Test CPU";
  host.cpu_cores = 2;
  JobFacts job;
  job.world_size = world;
  job.ranks_per_node = world;
  job.mpi_version = "Open MPI v4.1.4";
  return HardwareFingerprint(host, job);
}

inline Fingerprint TestModel(std::int64_t scale = 1) {
  return ModelFingerprint({{"float32", 1000 * scale},
                           {"float16", 20 * scale},
                           {"float32", 7 * scale}});
}

}  // namespace hvdtune::store::testing
