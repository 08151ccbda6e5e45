// nccl_busbw: hvdtune's allreduce of CUDA buffers beside raw ncclAllReduce
// on the same NCCL communicator and stream (the runtime's own, from
// Runtime::nccl_handles()), in the terms of nccl-tests: algbw = bytes / time,
// busbw = algbw * 2(n-1)/n (0 on one rank, where nothing crosses a link; the
// time and algbw ratios still compare the two).
//
// Both sides reduce the same device buffers. For every size and repeat the
// two timed loops run back to back, in an order that alternates, so that both
// see the same machine; each loop times `iters` synchronous calls (hvdtune:
// submit and wait for the handle; raw: ncclAllReduce and wait for the
// stream), and its time is the slowest rank's. Reported times are medians
// over repeats. Every loop's result is checked. Exits 77 (a skip for CTest)
// when the runtime has no NCCL backend, saying why.

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.h"
#include "hvdtune/runtime.h"
#include "hvdtune/types.h"

namespace hvdtune::bench {
namespace {

constexpr std::string_view kProgram = "nccl_busbw";
constexpr int kSkipExitCode = 77;

struct Options {
  std::int64_t min_bytes = std::int64_t{1} << 10;
  std::int64_t max_bytes = std::int64_t{1} << 30;
  std::int64_t step_factor = 4;
  std::int64_t iters = 0;  // 0: chosen per size
  std::int64_t warmup = 3;
  std::int64_t repeats = 5;
};

void CheckCuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string(call) +
                             " failed: " + cudaGetErrorString(e));
  }
}

void CheckNccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) {
    throw std::runtime_error(std::string(call) +
                             " failed: " + ncclGetErrorString(r));
  }
}

// Input element i of rank r: small integers, so float sums are exact.
float InputValue(std::int64_t i, int rank) {
  return static_cast<float>(i % 251 + rank);
}

float SumValue(std::int64_t i, int size) {
  return static_cast<float>(size * (i % 251) + size * (size - 1) / 2);
}

// Compares the first, middle and last elements of `out` (count floats on the
// device) with the sum over `size` ranks; throws naming `who` otherwise.
void CheckResult(const float* out, std::int64_t count, int size,
                 const std::string& who) {
  for (std::int64_t i : {std::int64_t{0}, count / 2, count - 1}) {
    float got = 0;
    CheckCuda(cudaMemcpy(&got, out + i, sizeof got, cudaMemcpyDeviceToHost),
              "cudaMemcpy");
    if (got != SumValue(i, size)) {
      throw std::runtime_error(
          fmt::format("{}: element {} of {} is {}, expected {}", who, i, count,
                      got, SumValue(i, size)));
    }
  }
}

std::int64_t ItersFor(const Options& o, std::int64_t bytes) {
  if (o.iters > 0) return o.iters;
  return std::clamp<std::int64_t>((std::int64_t{256} << 20) / bytes, 5, 100);
}

int Run(MpiSession& mpi, int argc, char** argv) {
  Options o;
  CLI::App app{
      "hvdtune allreduce of CUDA buffers beside raw ncclAllReduce on the "
      "runtime's communicator"};
  ConfigureApp(app);
  const std::int64_t kMaxBytes = std::int64_t{4} << 30;
  app.add_option("--min-bytes", o.min_bytes,
                 "smallest message (suffix K/M/G allowed)")
      ->transform(ByteCount(4, kMaxBytes))
      ->type_name("BYTES")
      ->default_str(FormatBytes(o.min_bytes));
  app.add_option("--max-bytes", o.max_bytes, "largest message")
      ->transform(ByteCount(4, kMaxBytes))
      ->type_name("BYTES")
      ->default_str(FormatBytes(o.max_bytes));
  app.add_option("--step-factor", o.step_factor, "Size multiplier per row")
      ->check(IntIn(2, 1024));
  app.add_option("--iters", o.iters, "Timed calls per loop (0: per size)")
      ->check(IntIn(0, 1000000));
  app.add_option("--warmup", o.warmup, "Untimed calls per size and side")
      ->check(IntIn(0, 1000));
  app.add_option("--repeats", o.repeats, "Timed loops per size and side")
      ->check(IntIn(1, 1000));
  const int rank = mpi.rank(), size = mpi.size();
  if (!ParseFlags(app, argc, argv, rank)) return 0;
  if (o.min_bytes > o.max_bytes) {
    throw UsageError("--min-bytes " + std::to_string(o.min_bytes) +
                     " is above --max-bytes " + std::to_string(o.max_bytes));
  }

  Runtime rt;
  if (!rt.has_nccl()) {
    if (rank == 0) {
      std::cout << "nccl_busbw: could not run: the runtime has no NCCL "
                   "backend: "
                << rt.nccl_unavailable() << "\n";
    }
    rt.Shutdown();
    return kSkipExitCode;
  }
  const NcclHandles nccl = rt.nccl_handles();
  auto comm = static_cast<ncclComm_t>(nccl.world_comm);
  auto stream = static_cast<cudaStream_t>(nccl.stream);
  CheckCuda(cudaSetDevice(nccl.device), "cudaSetDevice");

  const std::int64_t max_count = o.max_bytes / 4;
  float* in = nullptr;
  float* out = nullptr;
  const auto max_size = static_cast<std::size_t>(max_count) * sizeof(float);
  CheckCuda(cudaMalloc(reinterpret_cast<void**>(&in), max_size), "cudaMalloc");
  CheckCuda(cudaMalloc(reinterpret_cast<void**>(&out), max_size), "cudaMalloc");
  {
    std::vector<float> host(static_cast<std::size_t>(max_count));
    for (std::int64_t i = 0; i < max_count; ++i) {
      host[static_cast<std::size_t>(i)] = InputValue(i, rank);
    }
    CheckCuda(cudaMemcpy(in, host.data(), max_size, cudaMemcpyHostToDevice),
              "cudaMemcpy");
  }

  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  const double bus_factor = 2.0 * (size - 1) / size;
  if (rank == 0) {
    std::cout << fmt::format(
        "# nccl_busbw: {} rank(s), device {}, NCCL {}, float32 sum, out of "
        "place; medians of {} repeats, the two sides interleaved\n",
        size, nccl.device, nccl_version, o.repeats);
    if (size == 1) {
      std::cout << "# one rank: busbw = algbw * 2(n-1)/n is 0 (nothing "
                   "crosses a link); compare the time and algbw ratios\n";
    }
    std::cout << fmt::format(
        "# {:>10} {:>11} | {:>10} {:>9} {:>9} | {:>10} {:>9} {:>9} | "
        "{:>8}\n",
        "size", "count", "hvd_us", "algbw", "busbw", "nccl_us", "algbw",
        "busbw", "hvd/nccl");
    std::cout << "# algbw, busbw in GB/s; hvd/nccl = hvdtune algbw / raw "
                 "algbw (= raw time / hvdtune time)\n";
  }

  const auto hvdtune_call = [&](std::int64_t count) {
    const std::int64_t shape[] = {count};
    WaitOk(rt.Allreduce("nccl_busbw", in, out, shape, DataType::kFloat32,
                        ReduceOp::kSum),
           "hvdtune allreduce");
  };
  const auto raw_call = [&](std::int64_t count) {
    CheckNccl(ncclAllReduce(in, out, static_cast<std::size_t>(count),
                            ncclFloat32, ncclSum, comm, stream),
              "ncclAllReduce");
    CheckCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  };

  for (std::int64_t bytes = o.min_bytes; bytes <= o.max_bytes;
       bytes *= o.step_factor) {
    const std::int64_t count = std::max<std::int64_t>(1, bytes / 4);
    const std::int64_t iters = ItersFor(o, bytes);
    for (std::int64_t w = 0; w < o.warmup; ++w) {
      hvdtune_call(count);
      raw_call(count);
    }
    std::vector<double> hvd_times, raw_times;
    for (std::int64_t r = 0; r < o.repeats; ++r) {
      const bool hvdtune_first = r % 2 == 0;
      for (int side = 0; side < 2; ++side) {
        const bool hvdtune_side = (side == 0) == hvdtune_first;
        // Cleared on the NCCL stream (non-blocking: the legacy default
        // stream would not order it before the collective).
        CheckCuda(cudaMemsetAsync(out, 0, static_cast<std::size_t>(count) * 4,
                                  stream),
                  "cudaMemsetAsync");
        CheckCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        if (hvdtune_side) {
          hvd_times.push_back(TimeLoop(iters, [&] { hvdtune_call(count); }));
          CheckResult(out, count, size, "hvdtune allreduce");
        } else {
          raw_times.push_back(TimeLoop(iters, [&] { raw_call(count); }));
          CheckResult(out, count, size, "ncclAllReduce");
        }
      }
    }
    const double hvd = Median(hvd_times), raw = Median(raw_times);
    const double b = static_cast<double>(count) * 4;
    const double hvd_algbw = b / hvd / 1e9, raw_algbw = b / raw / 1e9;
    if (rank == 0) {
      std::cout << fmt::format(
          "  {:>10} {:>11} | {:>10.1f} {:>9.2f} {:>9.2f} | {:>10.1f} "
          "{:>9.2f} {:>9.2f} | {:>8.3f}\n",
          FormatBytes(count * 4), count, hvd * 1e6, hvd_algbw,
          hvd_algbw * bus_factor, raw * 1e6, raw_algbw, raw_algbw * bus_factor,
          hvd_algbw / raw_algbw);
      std::cout.flush();
    }
  }
  cudaFree(in);
  cudaFree(out);
  rt.Shutdown();
  return 0;
}

}  // namespace
}  // namespace hvdtune::bench

int main(int argc, char** argv) {
  return hvdtune::bench::RunBenchMain(argc, argv, hvdtune::bench::kProgram,
                                      hvdtune::bench::Run);
}
