// A small training job for the metrics and timeline tests: every step
// allreduces --tensors float32 tensors (optionally under new names each
// step, to check that metric labels stay bounded) and marks the step for
// the autotuner. Everything else comes from the environment
// (HOROVOD_METRICS_PORT, HOROVOD_TIMELINE, HOROVOD_AUTOTUNE, ...) through
// DefaultServices. Runs --steps steps, or until --stop-file exists (all
// ranks agree through an allreduce), whichever is first; with
// --slow-after-freeze-ms, every step after tuning froze sleeps that long
// (a throughput regression for the alert).
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hvdtune/runtime.h"

namespace {

struct Args {
  int tensors = 50;
  int elements = 1024;
  long steps = 1000000;
  bool unique_names = false;
  std::string stop_file;
  int slow_after_freeze_ms = 0;
  double max_seconds = 600;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--tensors")
      a.tensors = std::stoi(v);
    else if (k == "--elements")
      a.elements = std::stoi(v);
    else if (k == "--steps")
      a.steps = std::stol(v);
    else if (k == "--unique-names")
      a.unique_names = v == "1";
    else if (k == "--stop-file")
      a.stop_file = v;
    else if (k == "--slow-after-freeze-ms")
      a.slow_after_freeze_ms = std::stoi(v);
    else if (k == "--max-seconds")
      a.max_seconds = std::stod(v);
    else
      throw std::invalid_argument("unknown flag " + k);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  int code = 0;
  try {
    const Args a = Parse(argc, argv);
    hvdtune::Runtime runtime{hvdtune::RuntimeOptions{}};
    // The kill test finds the ranks by this line. It goes out in one write:
    // piecewise `<<` writes to an unbuffered stream interleave with the other
    // ranks' lines in mpirun's forwarded output.
    const std::string hello = "telemetry_job: rank " +
                              std::to_string(runtime.rank()) + " pid " +
                              std::to_string(getpid()) + "\n";
    if (::write(STDERR_FILENO, hello.data(), hello.size()) !=
        static_cast<ssize_t>(hello.size())) {
      throw std::runtime_error("cannot write to stderr");
    }
    const std::vector<std::int64_t> shape = {a.elements};
    std::vector<std::vector<float>> in(
        static_cast<std::size_t>(a.tensors),
        std::vector<float>(static_cast<std::size_t>(a.elements), 1.0f));
    auto out = in;
    const auto begin = std::chrono::steady_clock::now();
    for (long step = 0; step < a.steps; ++step) {
      std::vector<hvdtune::Handle> handles;
      for (int t = 0; t < a.tensors; ++t) {
        std::string name = "grad." + std::to_string(t);
        if (a.unique_names) name += ".step" + std::to_string(step);
        handles.push_back(runtime.Allreduce(name, in[t].data(), out[t].data(),
                                            shape, hvdtune::DataType::kFloat32,
                                            hvdtune::ReduceOp::kSum));
      }
      for (auto& h : handles) {
        const hvdtune::Status s = h.Wait();
        if (!s.ok()) throw std::runtime_error(s.ToString());
      }
      if (out[0][0] != static_cast<float>(runtime.size())) {
        throw std::runtime_error("wrong allreduce result");
      }
      runtime.MarkStep();
      if (a.slow_after_freeze_ms > 0 &&
          runtime.autotune_status().phase == hvdtune::AutotunePhase::kFrozen) {
        std::this_thread::sleep_for(
            std::chrono::milliseconds(a.slow_after_freeze_ms));
      }
      // Stop together: any rank that sees the stop file (or its time
      // limit) stops everyone.
      const double elapsed = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - begin)
                                 .count();
      std::int32_t stop = elapsed > a.max_seconds;
      if (!a.stop_file.empty()) {
        if (std::FILE* f = std::fopen(a.stop_file.c_str(), "r")) {
          std::fclose(f);
          stop = 1;
        }
      }
      std::int32_t any = 0;
      const std::vector<std::int64_t> one = {1};
      const hvdtune::Status s =
          runtime
              .Allreduce("stop", &stop, &any, one, hvdtune::DataType::kInt32,
                         hvdtune::ReduceOp::kMax)
              .Wait();
      if (!s.ok()) throw std::runtime_error(s.ToString());
      if (any) break;
    }
    runtime.Shutdown();
    if (runtime.rank() == 0) std::cout << "telemetry_job: done" << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "telemetry_job: " << e.what() << std::endl;
    code = 1;
  }
  return code;
}
