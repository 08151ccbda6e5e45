// Fingerprints of a job: the hardware and software it runs on, and the
// model's gradients as one step sends them. Stable across runs (no times,
// no host names, no process ids), printable, and kept with their raw parts
// so that similar jobs can be found.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hvdtune::store {

/// Ordered key=value parts; the hash is taken over Text().
struct Fingerprint {
  std::vector<std::pair<std::string, std::string>> parts;

  /// "key=value\n" per part, in order (the stored raw form).
  std::string Text() const;
  /// 16 lower-case hex digits (FNV-1a 64 of Text()).
  std::string Hash() const;
  /// The value of `key`; empty when absent.
  std::string Get(const std::string& key) const;
  /// Parses Text() back; lines without '=' are ignored.
  static Fingerprint FromText(const std::string& text);
};

/// What this machine is, read from /proc (no external commands).
struct HostFacts {
  std::string cpu_model;
  int cpu_cores = 0;
  /// Empty / 0 without an NVIDIA driver.
  std::string gpu_model;
  int gpu_count = 0;
  std::string gpu_driver;
  std::string cuda_version;
};
HostFacts ProbeHost();

/// What the job is made of besides the host.
struct JobFacts {
  int world_size = 1;
  int ranks_per_node = 1;
  int nodes = 1;
  /// "mpi" or "nccl".
  std::string backend = "mpi";
  std::string mpi_version;
  /// Empty when NCCL is not used.
  std::string nccl_version;
};

Fingerprint HardwareFingerprint(const HostFacts& host, const JobFacts& job);

/// One tensor of a training step.
struct TensorShape {
  /// "float32", "float16", ...
  std::string dtype;
  std::int64_t elements = 0;
};
/// Parts: tensors (count), elements (total) and shapes, the ordered list
/// "dtype:elements,..." (the raw list).
Fingerprint ModelFingerprint(const std::vector<TensorShape>& step);

/// 1 for the same hardware and job layout; 0.75 / 0.5 when only the world
/// size, the node count or the ranks per node differ (one or more of them);
/// 0 when anything else differs (CPU, GPU, driver, backend, libraries).
double HardwareSimilarity(const Fingerprint& a, const Fingerprint& b);
/// 1 for the same list; 0.5 + 0.5 x (smaller / larger total elements) for
/// the same dtypes in the same order with other sizes (the same layers at
/// another scale); below 0.5 otherwise.
double ModelSimilarity(const Fingerprint& a, const Fingerprint& b);

/// "hhhhhhhhhhhhhhhh-mmmmmmmmmmmmmmmm": hardware hash, model hash.
std::string PrintableFingerprint(const Fingerprint& hardware,
                                 const Fingerprint& model);

}  // namespace hvdtune::store
