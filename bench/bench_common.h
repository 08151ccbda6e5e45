// Helpers shared by the benchmarks: strict command-line parsing, MPI setup,
// timing statistics, environment overrides for Runtime options and output
// that only rank 0 prints.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hvdtune/knobs.h"
#include "hvdtune/runtime.h"

namespace hvdtune::bench {

/// A bad command-line value. The message names the flag.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Declarative `--flag VALUE` / `--flag=VALUE` parser. Every value is checked
/// strictly (whole string, range); errors throw UsageError naming the flag.
class FlagParser {
 public:
  FlagParser(std::string program, std::string summary);

  void AddInt(std::string name, std::int64_t* out, std::int64_t min_value,
              std::int64_t max_value, std::string help);
  /// A byte count with an optional K/M/G suffix (powers of 1024).
  void AddBytes(std::string name, std::int64_t* out, std::int64_t min_value,
                std::int64_t max_value, std::string help);
  void AddDouble(std::string name, double* out, double min_value,
                 double max_value, bool min_exclusive, std::string help);
  void AddString(std::string name, std::string* out, std::string help);
  /// Comma-separated list, at least one non-empty item.
  void AddList(std::string name, std::vector<std::string>* out,
               std::string help);
  /// Comma-separated list of integers in [min_value, max_value].
  void AddIntList(std::string name, std::vector<std::int64_t>* out,
                  std::int64_t min_value, std::int64_t max_value,
                  std::string help);
  /// A switch without a value.
  void AddSwitch(std::string name, bool* out, std::string help);

  /// Parses argv. Returns false when --help was given (Usage() should be
  /// printed). Throws UsageError on an unknown flag or bad value.
  bool Parse(int argc, char** argv);
  std::string Usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    bool takes_value = true;
    std::function<void(std::string_view)> set;
  };
  void Add(std::string name, std::string help, std::string default_text,
           bool takes_value, std::function<void(std::string_view)> set);

  std::string program_;
  std::string summary_;
  std::vector<Flag> flags_;
};

/// Parses "4096", "4K", "16M", "1G" (powers of 1024). Throws UsageError
/// naming `flag`.
std::int64_t ParseByteCount(std::string_view flag, std::string_view text);
/// "4 KiB", "16 MiB", "1.5 GiB".
std::string FormatBytes(std::int64_t bytes);

/// MPI_Init_thread(MPI_THREAD_MULTIPLE) on construction, MPI_Finalize on
/// destruction. Throws when the library cannot give MPI_THREAD_MULTIPLE.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

/// Runs `body` with MPI set up and turns errors into exit codes: a
/// UsageError is printed once by rank 0 and exits 2 on every rank (all ranks
/// parse the same argv); any other exception is printed by the rank that
/// hit it and aborts the job (other ranks might be waiting on it).
int RunBenchMain(int argc, char** argv, std::string_view program,
                 int (*body)(MpiSession& mpi, int argc, char** argv));

/// Wall-clock seconds (steady clock).
double NowSeconds();
/// Largest value of `local` over the ranks of MPI_COMM_WORLD.
double MaxAcrossRanks(double local);
/// Mean of `local` over the ranks of MPI_COMM_WORLD.
double MeanAcrossRanks(double local);
/// Runs `op` `iters` times between a barrier and the clock; returns the
/// slowest rank's seconds per call (what a synchronous job would see).
double TimeLoop(std::int64_t iters, const std::function<void()>& op);
/// Waits for `handle`; throws std::runtime_error naming `what` if it failed.
void WaitOk(const Handle& handle, std::string_view what);
/// Median; the mean of the two middle values for an even count. 0 if empty.
double Median(std::vector<double> values);

/// The process environment with some variables replaced: what the benchmark
/// passes as RuntimeOptions::env to run one configuration.
EnvLookup EnvWithOverrides(std::map<std::string, std::string> overrides);

/// Throws UsageError naming `flag` unless every entry is a choice of the
/// allreduce algorithm knob.
void CheckAlgorithms(std::string_view flag,
                     const std::vector<std::string>& algorithms);

/// `prefix` followed by `index` ("t17"). Appends rather than using
/// operator+, which trips GCC 12's false -Wrestrict (PR 105329) at -O2.
std::string IndexedName(std::string_view prefix, std::int64_t index);

/// Builds one line of JSON from key/value pairs in insertion order.
class JsonRow {
 public:
  JsonRow& Add(std::string_view key, std::string_view value);
  JsonRow& Add(std::string_view key, const char* value) {
    return Add(key, std::string_view(value));
  }
  JsonRow& Add(std::string_view key, std::int64_t value);
  JsonRow& Add(std::string_view key, int value) {
    return Add(key, std::int64_t{value});
  }
  JsonRow& Add(std::string_view key, double value);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void Key(std::string_view key);
  std::string body_;
};

}  // namespace hvdtune::bench
