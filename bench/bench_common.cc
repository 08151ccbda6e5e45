#include "bench_common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <optional>

namespace hvdtune::bench {
namespace {

// Parses all of `text` as a T; nullopt on anything else (empty, trailing
// characters, out of T's range).
template <typename T>
std::optional<T> ParseWhole(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

CLI::Validator IntIn(std::int64_t min_value, std::int64_t max_value) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const std::optional<std::int64_t> value =
            ParseWhole<std::int64_t>(text);
        if (!value || *value < min_value || *value > max_value) {
          return fmt::format(
              "invalid value '{}' (expected an integer in [{}, {}])", text,
              min_value, max_value);
        }
        text = std::to_string(*value);
        return {};
      },
      "", "IntIn");
}

CLI::Validator ByteCount(std::int64_t min_value, std::int64_t max_value) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::string_view digits = text;
        std::int64_t unit = 1;
        if (!digits.empty()) {
          switch (digits.back()) {
            case 'K':
            case 'k':
              unit = std::int64_t{1} << 10;
              break;
            case 'M':
            case 'm':
              unit = std::int64_t{1} << 20;
              break;
            case 'G':
            case 'g':
              unit = std::int64_t{1} << 30;
              break;
            default:
              break;
          }
          if (unit != 1) digits.remove_suffix(1);
        }
        const std::optional<std::int64_t> count =
            ParseWhole<std::int64_t>(digits);
        if (!count || *count < 0) {
          return fmt::format(
              "invalid value '{}' (expected a byte count such as 4096, 4K, "
              "16M or 1G)",
              text);
        }
        // Compared before multiplying, which could overflow.
        if (*count > max_value / unit || *count * unit < min_value) {
          return fmt::format("invalid value '{}' (expected {} to {})", text,
                             FormatBytes(min_value), FormatBytes(max_value));
        }
        text = std::to_string(*count * unit);
        return {};
      },
      "", "ByteCount");
}

CLI::Validator NumberIn(double min_value, double max_value,
                        bool min_exclusive) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const std::optional<double> value = ParseWhole<double>(text);
        if (!value || !std::isfinite(*value) ||
            (min_exclusive ? *value <= min_value : *value < min_value) ||
            *value > max_value) {
          return fmt::format(
              "invalid value '{}' (expected a number in {}{:g}, {:g}])", text,
              min_exclusive ? "(" : "[", min_value, max_value);
        }
        return {};
      },
      "", "NumberIn");
}

CLI::Validator AllreduceAlgorithm() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::vector<std::string> names = AllreduceAlgorithmNames();
        if (std::find(names.begin(), names.end(), text) != names.end()) {
          return {};
        }
        return fmt::format(
            "unknown allreduce algorithm '{}' (this build has: {})", text,
            fmt::join(names, " "));
      },
      "", "AllreduceAlgorithm");
}

void ConfigureApp(CLI::App& app) {
  app.option_defaults()
      ->always_capture_default()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->disable_flag_override();
  app.footer("Run under mpirun -np N (tools/mpirun.sh); rank 0 prints.");
}

bool ParseFlags(CLI::App& app, int argc, char** argv, int rank) {
  try {
    app.parse(argc, argv);
    return true;
  } catch (const CLI::CallForHelp&) {
    if (rank == 0) std::cout << app.help() << std::flush;
    return false;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
}

std::vector<std::string> AllreduceAlgorithmNames() {
  return {AllreduceAlgorithms().begin(), AllreduceAlgorithms().end()};
}

std::string FormatBytes(std::int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return value == std::floor(value)
             ? fmt::format("{:.0f} {}", value, kUnits[unit])
             : fmt::format("{:.2f} {}", value, kUnits[unit]);
}

int RunBenchMain(int argc, char** argv, std::string_view program,
                 int (*body)(MpiSession& mpi, int argc, char** argv)) {
  // MPI_Init may rewrite argc / argv; the flags are parsed from the copy.
  int mpi_argc = argc;
  char** mpi_argv = argv;
  std::optional<MpiSession> mpi;
  try {
    mpi.emplace(&mpi_argc, &mpi_argv);
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
  try {
    return body(*mpi, argc, argv);
  } catch (const UsageError& e) {
    if (mpi->rank() == 0) {
      std::cerr << program << ": error: " << e.what() << "\n";
    }
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": error on rank " << mpi->rank() << ": "
              << e.what() << "\n"
              << std::flush;
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}

double MaxAcrossRanks(double local) {
  double global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return global;
}

double MeanAcrossRanks(double local) {
  double sum = 0;
  int size = 1;
  MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return sum / size;
}

double TimeLoop(std::int64_t iters, const std::function<void()>& op) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = NowSeconds();
  for (std::int64_t i = 0; i < iters; ++i) op();
  const double elapsed = NowSeconds() - start;
  return MaxAcrossRanks(elapsed) / static_cast<double>(iters);
}

EnvLookup EnvWithOverrides(std::map<std::string, std::string> overrides) {
  EnvLookup process = ProcessEnv();
  return [overrides = std::move(overrides),
          process](std::string_view name) -> std::optional<std::string> {
    if (const auto it = overrides.find(std::string(name));
        it != overrides.end()) {
      return it->second;
    }
    return process(name);
  };
}

namespace {

// Rounds every float in `json` to 6 significant digits.
void RoundFloats(Json& json) {
  if (json.is_number_float()) {
    const double value = json.get<double>();
    if (std::isfinite(value)) {
      json = ParseWhole<double>(fmt::format("{:.6g}", value)).value_or(value);
    }
  } else if (json.is_structured()) {
    for (Json& item : json) RoundFloats(item);
  }
}

}  // namespace

std::string JsonLine(const Json& row) {
  Json rounded = row;
  RoundFloats(rounded);
  return rounded.dump(-1, ' ', /*ensure_ascii=*/false,
                      Json::error_handler_t::replace);
}

}  // namespace hvdtune::bench
