// Helpers shared by the benchmarks: strict command-line parsing (CLI11), MPI
// setup, timing statistics, environment overrides for Runtime options and
// JSON rows (nlohmann-json).
#pragma once

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hvdtune/knobs.h"
#include "hvdtune/runtime.h"
#include "hvdtune/workloads/gradient_set.h"
#include "hvdtune/workloads/mpi_session.h"
#include "hvdtune/workloads/usage_error.h"

namespace hvdtune::bench {

// The workloads library's session, clock, statistics, tensor names and
// usage error, used unqualified across the benchmarks.
using workloads::IndexedName;
using workloads::Median;
using workloads::MpiSession;
using workloads::NowSeconds;
using workloads::UsageError;
using workloads::WaitOk;

// Command lines are parsed by CLI11. The validators below are strict (the
// whole value must parse, and lie in range) and return messages that name
// the value and what is allowed; CLI11 prefixes them with the flag. Use them
// with `->transform(...)`: IntIn and ByteCount rewrite the value in plain
// decimal, so that CLI11's own conversion (which reads "010" as octal and
// knows no K/M/G) sees the number that was checked.

/// An integer in [min_value, max_value].
CLI::Validator IntIn(std::int64_t min_value, std::int64_t max_value);
/// A byte count with an optional K/M/G suffix (powers of 1024: 4K, 16M, 1G)
/// in [min_value, max_value].
CLI::Validator ByteCount(std::int64_t min_value, std::int64_t max_value);
/// A finite number in [min_value, max_value], or (min_value, max_value] when
/// `min_exclusive`.
CLI::Validator NumberIn(double min_value, double max_value, bool min_exclusive);
/// One of AllreduceAlgorithmNames().
CLI::Validator AllreduceAlgorithm();

/// The benches' command-line conventions on a CLI11 app, to call before
/// adding options: defaults shown in --help, a flag given twice keeps its last
/// value (list flags add up), switches take no value.
void ConfigureApp(CLI::App& app);
/// Parses argv. Returns false when --help was given (rank 0 has printed the
/// help). Throws UsageError with CLI11's message on anything else.
bool ParseFlags(CLI::App& app, int argc, char** argv, int rank);

/// The allreduce algorithms this build has, in the algorithm knob's order.
/// Every bench lists or checks algorithms through this.
std::vector<std::string> AllreduceAlgorithmNames();

/// "4 KiB", "16 MiB", "1.50 GiB".
std::string FormatBytes(std::int64_t bytes);

/// Runs `body` with MPI set up and turns errors into exit codes: a
/// UsageError is printed once by rank 0 and exits 2 on every rank (all ranks
/// parse the same argv); any other exception is printed by the rank that
/// hit it and aborts the job (other ranks might be waiting on it).
int RunBenchMain(int argc, char** argv, std::string_view program,
                 int (*body)(MpiSession& mpi, int argc, char** argv));

/// Largest value of `local` over the ranks of MPI_COMM_WORLD.
double MaxAcrossRanks(double local);
/// Mean of `local` over the ranks of MPI_COMM_WORLD.
double MeanAcrossRanks(double local);
/// Runs `op` `iters` times between a barrier and the clock; returns the
/// slowest rank's seconds per call (what a synchronous job would see).
double TimeLoop(std::int64_t iters, const std::function<void()>& op);

/// The process environment with some variables replaced: what the benchmark
/// passes as RuntimeOptions::env to run one configuration.
EnvLookup EnvWithOverrides(std::map<std::string, std::string> overrides);

/// A JSON object whose keys print in insertion order.
using Json = nlohmann::ordered_json;

/// `row` as one line of compact JSON. Numbers keep 6 significant digits (a
/// benchmark's figures carry no more), NaN and infinities become null, and
/// bytes that are not UTF-8 become U+FFFD, so that user text (a file path)
/// never makes the line invalid.
std::string JsonLine(const Json& row);

}  // namespace hvdtune::bench
