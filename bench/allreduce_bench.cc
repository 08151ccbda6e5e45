// allreduce_bench: hvdtune's allreduce beside raw MPI_Allreduce, in the
// style of nccl-tests (size, count, time, algbw, busbw = algbw * 2(n-1)/n).
// With --collective reducescatter: hvdtune's reducescatter beside raw
// MPI_Reduce_scatter_block (busbw = algbw * (n-1)/n, size = the whole
// input, as nccl-tests counts it).
//
// An algorithm written gloo:NAME runs on the Gloo engine (the MPI engine
// otherwise): rank 0 serves a rendezvous store beside MPI and those loops'
// runtimes join through it (ServeGlooBesideMpi), so the two engines are
// compared side by side in one run.
//
// Both run on the same input and output buffers in the same process, and
// their timed loops alternate in a rotating order per size and repeat so that
// both see the same machine noise. hvdtune's loops each run in a fresh
// Runtime; raw MPI runs while no Runtime is alive (see Bench::Run). Each repeat
// times `iters` back-to-back synchronous calls; its time is the slowest rank's.
// Reported times are medians over repeats; warm-up calls are not timed.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.h"
#include "hvdtune/mpi.h"
#include "hvdtune/runtime.h"
#include "hvdtune/types.h"
#include "thread_handoff.h"

namespace hvdtune::bench {
namespace {

constexpr std::string_view kProgram = "allreduce_bench";

struct Options {
  std::int64_t min_bytes = std::int64_t{4} << 10;
  std::int64_t max_bytes = std::int64_t{256} << 20;
  std::int64_t step_factor = 2;
  std::int64_t iters = 0;  // 0: chosen per size
  std::int64_t warmup = 2;
  std::int64_t repeats = 5;
  std::string dtype = "float32";
  /// allreduce or reducescatter.
  std::string collective = "allreduce";
  std::vector<std::string> algorithms = {"native"};
  /// The interface of the gloo: loops' traffic (eth0 on the emulated
  /// cluster).
  std::string gloo_iface = "lo";
  bool json = false;
  /// Also time the floor of any runtime that agrees on what is ready before
  /// it runs it: one negotiation-sized allreduce, then the data's.
  bool negotiation_floor = false;
  /// Also time that floor run by a second thread that the caller hands each
  /// call to and waits for: the floor of a runtime with a background thread.
  bool thread_floor = false;
};

// Iterations per timed loop when --iters is not given: about 64 MiB of data
// per loop, between 3 and 100 calls.
std::int64_t ItersFor(const Options& opt, std::int64_t bytes) {
  if (opt.iters > 0) return opt.iters;
  const std::int64_t target = std::int64_t{64} << 20;
  return std::clamp<std::int64_t>(target / std::max<std::int64_t>(bytes, 1), 3,
                                  100);
}

// Input element i on rank r is (r + 1) + i % 7, so the sum over n ranks is
// n(n+1)/2 + n * (i % 7): exact in every dtype (uint8 wraps the same way).
template <typename T>
void FillInput(void* data, std::int64_t count, int rank) {
  T* p = static_cast<T*>(data);
  for (std::int64_t i = 0; i < count; ++i) {
    p[i] = static_cast<T>((rank + 1) + static_cast<int>(i % 7));
  }
}

template <typename T>
bool CheckSum(const void* data, std::int64_t count, int size) {
  const T* p = static_cast<const T*>(data);
  for (const std::int64_t i : {std::int64_t{0}, count / 2, count - 1}) {
    const T want =
        static_cast<T>(size * (size + 1) / 2 + size * static_cast<int>(i % 7));
    if (p[i] != want) return false;
  }
  return true;
}

template <typename Fn>
auto DispatchDtype(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kUInt8:
      return fn(std::uint8_t{});
    case DataType::kInt32:
      return fn(std::int32_t{});
    case DataType::kInt64:
      return fn(std::int64_t{});
    case DataType::kFloat64:
      return fn(double{});
    default:
      return fn(float{});
  }
}

struct Measurement {
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::vector<double> raw_seconds;
  std::vector<double> floor_seconds;
  std::vector<double> thread_floor_seconds;
  // One sample vector per algorithm.
  std::vector<std::vector<double>> hvd_seconds;
};

struct Row {
  double time_us;
  double algbw_gbps;
  double busbw_gbps;
};

// Bus bandwidth factor (nccl-tests): 2(n-1)/n for allreduce, (n-1)/n for
// reducescatter.
Row MakeRow(std::int64_t bytes, double seconds, int ranks, double factor = 2) {
  const double algbw = static_cast<double>(bytes) / seconds / 1e9;
  return {seconds * 1e6, algbw, algbw * factor * (ranks - 1) / ranks};
}

// Reducescatter: rank `rank`'s block of `block` elements of the sum.
template <typename T>
bool CheckShare(const void* data, std::int64_t block, int rank, int size) {
  const T* p = static_cast<const T*>(data);
  for (const std::int64_t k : {std::int64_t{0}, block / 2, block - 1}) {
    const std::int64_t i = rank * block + k;
    const T want =
        static_cast<T>(size * (size + 1) / 2 + size * static_cast<int>(i % 7));
    if (p[k] != want) return false;
  }
  return true;
}

class Bench {
 public:
  Bench(const Options& opt, DataType dtype, int rank, int size)
      : opt_(opt),
        dtype_(dtype),
        mpi_type_(hvdtune::NativeMpiType(dtype)),
        rank_(rank),
        size_(size) {
    const std::size_t bytes = static_cast<std::size_t>(opt.max_bytes);
    // Allocated once at the largest size and touched before any timing.
    input_.reset(
        static_cast<std::uint8_t*>(std::aligned_alloc(4096, Round(bytes))));
    output_.reset(
        static_cast<std::uint8_t*>(std::aligned_alloc(4096, Round(bytes))));
    if (!input_ || !output_) throw std::runtime_error("out of memory");
    const std::int64_t count = opt.max_bytes / DataTypeSize(dtype);
    DispatchDtype(dtype_, [&]<typename T>(T) {
      FillInput<T>(input_.get(), count, rank_);
    });
    std::memset(output_.get(), 0, bytes);
    for (std::int64_t b = opt.min_bytes; b <= opt.max_bytes;
         b *= opt.step_factor) {
      Measurement m;
      // Reducescatter: whole blocks of whole elements per rank.
      const std::int64_t unit = static_cast<std::int64_t>(DataTypeSize(dtype)) *
                                (scatter() ? size : 1);
      m.bytes = b - b % unit;
      m.count = m.bytes / static_cast<std::int64_t>(DataTypeSize(dtype));
      m.hvd_seconds.resize(opt.algorithms.size());
      sizes_.push_back(std::move(m));
      if (b > opt.max_bytes / opt.step_factor) break;
    }
  }

  // For every size and repeat, times raw MPI and each algorithm in a
  // rotating order. Each algorithm's loop gets a fresh Runtime and raw MPI
  // runs with none alive: an idle runtime's cycle thread negotiates every
  // cycle, which would slow down raw MPI calls sharing the cores.
  void Run() {
    // 0 = mpi_raw, then the algorithms, then the floors asked for.
    const std::size_t algos = opt_.algorithms.size();
    const std::size_t floors = opt_.negotiation_floor + opt_.thread_floor;
    const std::size_t phases = algos + 1 + floors;
    // A floor's phase, or 0 (raw MPI's, never taken for it) if not asked.
    const std::size_t floor_phase = opt_.negotiation_floor ? algos + 1 : 0;
    const std::size_t thread_phase = opt_.thread_floor ? algos + floors : 0;
    for (Measurement& m : sizes_) {
      const std::int64_t iters = ItersFor(opt_, m.bytes);
      for (std::int64_t r = 0; r < opt_.repeats; ++r) {
        for (std::size_t k = 0; k < phases; ++k) {
          const std::size_t phase = (k + static_cast<std::size_t>(r)) % phases;
          if (phase == 0) {
            m.raw_seconds.push_back(TimeRaw(m, iters, r == 0));
          } else if (phase == floor_phase) {
            m.floor_seconds.push_back(TimeFloor(m, iters));
          } else if (phase == thread_phase) {
            m.thread_floor_seconds.push_back(TimeThreadFloor(m, iters));
          } else {
            m.hvd_seconds[phase - 1].push_back(
                TimeHvdtune(m, opt_.algorithms[phase - 1], iters, r == 0));
          }
        }
      }
    }
  }

  void Print() const {
    if (rank_ != 0) return;
    if (opt_.json) {
      PrintJson();
    } else {
      PrintTable();
    }
  }

  bool scatter() const { return opt_.collective == "reducescatter"; }
  double factor() const { return scatter() ? 1.0 : 2.0; }

 private:
  struct FreeDeleter {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };

  static std::size_t Round(std::size_t bytes) {
    return std::max<std::size_t>((bytes + 4095) / 4096 * 4096, 4096);
  }

  // Raw MPI's own call: MPI_Allreduce, or MPI_Reduce_scatter_block.
  void RawCall(const Measurement& m) {
    if (scatter()) {
      MPI_Reduce_scatter_block(input_.get(), output_.get(),
                               static_cast<int>(m.count / size_), mpi_type_,
                               MPI_SUM, MPI_COMM_WORLD);
    } else {
      MPI_Allreduce(input_.get(), output_.get(), static_cast<int>(m.count),
                    mpi_type_, MPI_SUM, MPI_COMM_WORLD);
    }
  }

  double TimeRaw(const Measurement& m, std::int64_t iters, bool verify) {
    const auto raw = [&] { RawCall(m); };
    if (verify) Verify(m, raw, "mpi_raw");
    for (std::int64_t i = 0; i < opt_.warmup; ++i) raw();
    return TimeLoop(iters, raw);
  }

  // The runtime's negotiation message at the default cache capacity: a
  // flags word, the hit bits and the invalid bits, ANDed.
  double TimeFloor(const Measurement& m, std::int64_t iters) {
    const auto floor = [&] { NegotiateThenReduce(m); };
    for (std::int64_t i = 0; i < opt_.warmup; ++i) floor();
    return TimeLoop(iters, floor);
  }

  void NegotiateThenReduce(const Measurement& m) {
    std::fill(bits_.begin(), bits_.end(), ~std::uint64_t{0});
    MPI_Allreduce(MPI_IN_PLACE, bits_.data(), static_cast<int>(bits_.size()),
                  MPI_UINT64_T, MPI_BAND, MPI_COMM_WORLD);
    RawCall(m);
  }

  // The same on a worker thread, handed each call (the worker lives only
  // for this loop, so the other loops run without it).
  double TimeThreadFloor(const Measurement& m, std::int64_t iters) {
    ThreadHandoff worker([&] { NegotiateThenReduce(m); });
    const auto call = [&] { worker.Call(); };
    for (std::int64_t i = 0; i < opt_.warmup; ++i) call();
    return TimeLoop(iters, call);
  }

  double TimeHvdtune(const Measurement& m, const std::string& entry,
                     std::int64_t iters, bool verify) {
    constexpr std::string_view kGloo = "gloo:";
    const bool gloo = entry.starts_with(kGloo);
    const std::string algorithm = gloo ? entry.substr(kGloo.size()) : entry;
    std::map<std::string, std::string> env = {
        {"HVDTUNE_ALLREDUCE_ALGORITHM", algorithm}};
    if (gloo) {
      if (!gloo_store_ && gloo_vars_.empty()) {
        gloo_store_ = ServeGlooBesideMpi(&gloo_vars_, opt_.gloo_iface);
      }
      env.insert(gloo_vars_.begin(), gloo_vars_.end());
    }
    Runtime runtime(RuntimeOptions{EnvWithOverrides(std::move(env))});
    if (runtime.knobs().allreduce_algorithm_name() != algorithm) {
      throw std::runtime_error("runtime did not select algorithm " + algorithm);
    }
    const std::vector<std::int64_t> shape = {m.count};
    const std::string name = IndexedName("allreduce_bench.", m.bytes);
    const auto hvd = [&] {
      if (scatter()) {
        // Into the same output buffer as raw MPI's.
        WaitOk(runtime.Reducescatter(name, input_.get(), shape, dtype_,
                                     ReduceOp::kSum, output_.get()),
               name);
        return;
      }
      WaitOk(runtime.Allreduce(name, input_.get(), output_.get(), shape, dtype_,
                               ReduceOp::kSum),
             name);
    };
    // The first call also fills the response cache; at least one untimed.
    if (verify) {
      Verify(m, hvd, algorithm);
    } else {
      hvd();
    }
    for (std::int64_t i = 1; i < opt_.warmup; ++i) hvd();
    const double seconds = TimeLoop(iters, hvd);
    runtime.Shutdown();
    return seconds;
  }

  // One checked call of `op` on a zeroed output: a benchmark of a wrong
  // result is worthless.
  template <typename Op>
  void Verify(const Measurement& m, const Op& op, const std::string& who) {
    if (m.count == 0) return;
    std::memset(output_.get(), 0, static_cast<std::size_t>(m.bytes));
    op();
    const bool ok = DispatchDtype(dtype_, [&]<typename T>(T) {
      return scatter()
                 ? CheckShare<T>(output_.get(), m.count / size_, rank_, size_)
                 : CheckSum<T>(output_.get(), m.count, size_);
    });
    if (!ok) {
      throw std::runtime_error(who + " returned a wrong sum at " +
                               std::to_string(m.bytes) + " bytes");
    }
  }

  void PrintJson() const {
    for (const Measurement& m : sizes_) {
      PrintJsonRow("mpi_raw", m.bytes, Median(m.raw_seconds));
      for (std::size_t a = 0; a < opt_.algorithms.size(); ++a) {
        PrintJsonRow(opt_.algorithms[a], m.bytes, Median(m.hvd_seconds[a]));
      }
      if (!m.floor_seconds.empty()) {
        PrintJsonRow("negotiation_floor", m.bytes, Median(m.floor_seconds));
      }
      if (!m.thread_floor_seconds.empty()) {
        PrintJsonRow("thread_floor", m.bytes, Median(m.thread_floor_seconds));
      }
    }
    std::cout << std::flush;
  }

  void PrintJsonRow(std::string_view algorithm, std::int64_t bytes,
                    double seconds) const {
    const Row row = MakeRow(bytes, seconds, size_, factor());
    std::cout << JsonLine({{"algorithm", algorithm},
                           {"bytes", bytes},
                           {"time_us", row.time_us},
                           {"algbw_gbps", row.algbw_gbps},
                           {"busbw_gbps", row.busbw_gbps}})
              << "\n";
  }

  void PrintTable() const {
    fmt::print(
        "# allreduce_bench: {} {} ranks, {}, sum, median of {} repeats, iters "
        "{}, warmup {}\n",
        opt_.collective, size_, opt_.dtype, opt_.repeats,
        opt_.iters > 0 ? std::to_string(opt_.iters)
                       : "auto (~64 MiB per loop, 3..100)",
        opt_.warmup);
    fmt::print("# busbw = algbw * {}(n-1)/n; ratio = busbw / {} busbw\n",
               scatter() ? "" : "2",
               scatter() ? "MPI_Reduce_scatter_block" : "mpi_raw");
    // Implementation names sit above their columns, 6 or 7 from the right.
    fmt::print("{:12} {:12} {:8}  {:>23}      ", "", "", "", "mpi_raw");
    for (const std::string& a : opt_.algorithms) {
      fmt::print("  {:>29}       ", a);
    }
    if (opt_.negotiation_floor) fmt::print("  {:>29}       ", "floor");
    if (opt_.thread_floor) fmt::print("  {:>29}       ", "thread_floor");
    fmt::print("\n{:>12} {:>12} {:>8}  {:>10} {:>9} {:>8}", "size(B)", "count",
               "type", "time(us)", "algbw", "busbw");
    const std::size_t columns =
        opt_.algorithms.size() + opt_.negotiation_floor + opt_.thread_floor;
    for (std::size_t a = 0; a < columns; ++a) {
      fmt::print("  {:>10} {:>9} {:>8} {:>6}", "time(us)", "algbw", "busbw",
                 "ratio");
    }
    fmt::print("\n");
    std::vector<std::vector<double>> big_ratios(opt_.algorithms.size());
    for (const Measurement& m : sizes_) {
      const Row raw = MakeRow(m.bytes, Median(m.raw_seconds), size_, factor());
      fmt::print("{:12} {:12} {:>8}  {:10.1f} {:9.3f} {:8.3f}", m.bytes,
                 m.count, opt_.dtype, raw.time_us, raw.algbw_gbps,
                 raw.busbw_gbps);
      for (std::size_t a = 0; a < opt_.algorithms.size(); ++a) {
        const Row hvd =
            MakeRow(m.bytes, Median(m.hvd_seconds[a]), size_, factor());
        const double ratio = hvd.busbw_gbps / raw.busbw_gbps;
        if (m.bytes >= (std::int64_t{16} << 20)) big_ratios[a].push_back(ratio);
        fmt::print("  {:10.1f} {:9.3f} {:8.3f} {:6.3f}", hvd.time_us,
                   hvd.algbw_gbps, hvd.busbw_gbps, ratio);
      }
      for (const std::vector<double>* floor :
           {&m.floor_seconds, &m.thread_floor_seconds}) {
        if (floor->empty()) continue;
        const Row f = MakeRow(m.bytes, Median(*floor), size_, factor());
        fmt::print("  {:10.1f} {:9.3f} {:8.3f} {:6.3f}", f.time_us,
                   f.algbw_gbps, f.busbw_gbps, f.busbw_gbps / raw.busbw_gbps);
      }
      fmt::print("\n");
    }
    // Which algorithm wins where is what the tuner has to learn: say it.
    if (opt_.algorithms.size() > 1) {
      fmt::print("# fastest algorithm per size:");
      for (const Measurement& m : sizes_) {
        std::size_t best = 0;
        for (std::size_t a = 1; a < opt_.algorithms.size(); ++a) {
          if (Median(m.hvd_seconds[a]) < Median(m.hvd_seconds[best])) best = a;
        }
        fmt::print(" {}={}", FormatBytes(m.bytes), opt_.algorithms[best]);
      }
      fmt::print("\n");
    }
    // With loops of both engines: the best Gloo loop's busbw over the best
    // MPI-engine loop's at each size (above 1: Gloo is ahead).
    const auto best_of = [&](const Measurement& m, bool gloo) {
      std::optional<std::size_t> best;
      for (std::size_t a = 0; a < opt_.algorithms.size(); ++a) {
        if (opt_.algorithms[a].starts_with("gloo:") != gloo) continue;
        if (!best || Median(m.hvd_seconds[a]) < Median(m.hvd_seconds[*best])) {
          best = a;
        }
      }
      return best;
    };
    if (!sizes_.empty() && best_of(sizes_.front(), true) &&
        best_of(sizes_.front(), false)) {
      fmt::print("# best gloo / best mpi engine busbw per size:");
      for (const Measurement& m : sizes_) {
        const std::size_t g = *best_of(m, true), b = *best_of(m, false);
        fmt::print(" {}={:.3g} ({} / {})", FormatBytes(m.bytes),
                   Median(m.hvd_seconds[b]) / Median(m.hvd_seconds[g]),
                   opt_.algorithms[g], opt_.algorithms[b]);
      }
      fmt::print("\n");
    }
    for (std::size_t a = 0; a < opt_.algorithms.size(); ++a) {
      if (big_ratios[a].empty()) continue;
      fmt::print(
          "# {} busbw / mpi_raw at >= 16 MiB: min {:.3f}, median {:.3f}\n",
          opt_.algorithms[a],
          *std::min_element(big_ratios[a].begin(), big_ratios[a].end()),
          Median(big_ratios[a]));
    }
    std::fflush(stdout);
  }

  const Options& opt_;
  DataType dtype_;
  MPI_Datatype mpi_type_;
  /// The Gloo engine's store and variables, from the first gloo: loop on
  /// (every rank reaches it at the same point).
  std::unique_ptr<RendezvousServer> gloo_store_;
  std::map<std::string, std::string> gloo_vars_;
  int rank_;
  int size_;
  std::unique_ptr<std::uint8_t, FreeDeleter> input_;
  std::unique_ptr<std::uint8_t, FreeDeleter> output_;
  std::vector<Measurement> sizes_;
  // The floors' negotiation message, sized once.
  std::vector<std::uint64_t> bits_ = std::vector<std::uint64_t>(
      1 +
      2 * static_cast<std::size_t>(KnobSettings().cache_capacity() + 63) / 64);
};

int Main(MpiSession& mpi, int argc, char** argv) {
  Options opt;
  CLI::App app(
      "hvdtune allreduce beside raw MPI_Allreduce on the same buffers "
      "(nccl-tests style table).",
      std::string(kProgram));
  ConfigureApp(app);
  const std::int64_t kMaxBytes = std::int64_t{1} << 34;
  app.add_option("--min-bytes", opt.min_bytes,
                 "smallest message (suffix K/M/G allowed)")
      ->transform(ByteCount(1, kMaxBytes))
      ->type_name("BYTES")
      ->default_str(FormatBytes(opt.min_bytes));
  app.add_option("--max-bytes", opt.max_bytes, "largest message")
      ->transform(ByteCount(1, kMaxBytes))
      ->type_name("BYTES")
      ->default_str(FormatBytes(opt.max_bytes));
  app.add_option("--step-factor", opt.step_factor,
                 "multiply the size by this between rows")
      ->transform(IntIn(2, 1024));
  app.add_option("--iters", opt.iters,
                 "calls per timed loop; 0 = ~64 MiB per loop, 3..100")
      ->transform(IntIn(0, 1000000));
  app.add_option("--warmup", opt.warmup,
                 "untimed calls before every timed loop")
      ->transform(IntIn(1, 1000000));
  app.add_option("--repeats", opt.repeats,
                 "timed loops per size and implementation (median reported)")
      ->transform(IntIn(1, 100000));
  app.add_option("--dtype", opt.dtype,
                 "uint8, int32, int64, float32 or float64");
  app.add_option("--algorithms", opt.algorithms,
                 fmt::format("hvdtune allreduce algorithms to run "
                             "(comma-separated; this build has {}); "
                             "gloo:NAME runs NAME on the Gloo engine",
                             fmt::join(AllreduceAlgorithmNames(), ", ")))
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            std::string name = text;
            if (name.starts_with("gloo:")) name = name.substr(5);
            return AllreduceAlgorithm()(name);
          },
          "", "AllreduceAlgorithm"));
  app.add_option("--gloo-iface", opt.gloo_iface,
                 "network interface of the gloo: algorithms' traffic (every "
                 "node must have it; eth0 on the emulated cluster)");
  app.add_flag("--negotiation-floor", opt.negotiation_floor,
               "also time raw MPI with a negotiation before each call (a "
               "1,024-bit AND allreduce, the runtime's at the default cache "
               "capacity): the floor of any runtime that agrees on what is "
               "ready before running it");
  app.add_flag("--thread-floor", opt.thread_floor,
               "also time that floor on a second thread that each call is "
               "handed to and waited for (condition variables both ways): "
               "the floor of a runtime with a background thread");
  app.add_option("--collective", opt.collective,
                 "allreduce (beside MPI_Allreduce) or reducescatter (beside "
                 "MPI_Reduce_scatter_block; size = the whole input)")
      ->check(CLI::IsMember({"allreduce", "reducescatter"}));
  app.add_flag("--json", opt.json,
               "print one JSON object per row instead of the table");
  if (!ParseFlags(app, argc, argv, mpi.rank())) return 0;
  if (opt.min_bytes > opt.max_bytes) {
    throw UsageError("--min-bytes (" + std::to_string(opt.min_bytes) +
                     ") is larger than --max-bytes (" +
                     std::to_string(opt.max_bytes) + ")");
  }
  const std::optional<DataType> dtype = ParseDataType(opt.dtype);
  if (!dtype || hvdtune::NativeMpiType(*dtype) == MPI_DATATYPE_NULL) {
    throw UsageError("--dtype: invalid value '" + opt.dtype +
                     "' (expected uint8, int32, int64, float32 or float64; "
                     "raw MPI has no 16-bit float type to compare with)");
  }
  if (opt.min_bytes < static_cast<std::int64_t>(DataTypeSize(*dtype))) {
    throw UsageError("--min-bytes: smaller than one " + opt.dtype + " element");
  }
  if (opt.max_bytes / static_cast<std::int64_t>(DataTypeSize(*dtype)) >
      std::numeric_limits<int>::max()) {
    throw UsageError(
        "--max-bytes: more elements than MPI_Allreduce's int "
        "count can hold");
  }

  Bench bench(opt, *dtype, mpi.rank(), mpi.size());
  bench.Run();
  bench.Print();
  return 0;
}

}  // namespace
}  // namespace hvdtune::bench

int main(int argc, char** argv) {
  return hvdtune::bench::RunBenchMain(argc, argv, hvdtune::bench::kProgram,
                                      hvdtune::bench::Main);
}
