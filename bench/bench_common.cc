#include "bench_common.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

namespace hvdtune::bench {
namespace {

std::int64_t ParseIntValue(std::string_view flag, std::string_view text,
                           std::int64_t min_value, std::int64_t max_value) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min_value ||
      value > max_value) {
    std::ostringstream msg;
    msg << flag << ": invalid value '" << text << "' (expected an integer in ["
        << min_value << ", " << max_value << "])";
    throw UsageError(msg.str());
  }
  return value;
}

std::vector<std::string> SplitList(std::string_view flag,
                                   std::string_view text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string::npos
                                                           : comma - start);
    if (item.empty()) {
      throw UsageError(std::string(flag) + ": invalid value '" +
                       std::string(text) +
                       "' (expected a comma-separated list of non-empty "
                       "items)");
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

template <typename T>
std::string JoinList(const std::vector<T>& items) {
  std::ostringstream out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    out << (i ? "," : "") << items[i];
  }
  return out.str();
}

}  // namespace

FlagParser::FlagParser(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagParser::Add(std::string name, std::string help,
                     std::string default_text, bool takes_value,
                     std::function<void(std::string_view)> set) {
  flags_.push_back({std::move(name), std::move(help), std::move(default_text),
                    takes_value, std::move(set)});
}

void FlagParser::AddInt(std::string name, std::int64_t* out,
                        std::int64_t min_value, std::int64_t max_value,
                        std::string help) {
  const std::string flag = "--" + name;
  Add(std::move(name), std::move(help), std::to_string(*out), true,
      [=](std::string_view text) {
        *out = ParseIntValue(flag, text, min_value, max_value);
      });
}

void FlagParser::AddBytes(std::string name, std::int64_t* out,
                          std::int64_t min_value, std::int64_t max_value,
                          std::string help) {
  const std::string flag = "--" + name;
  Add(std::move(name), std::move(help), FormatBytes(*out), true,
      [=](std::string_view text) {
        const std::int64_t value = ParseByteCount(flag, text);
        if (value < min_value || value > max_value) {
          throw UsageError(flag + ": invalid value '" + std::string(text) +
                           "' (expected " + FormatBytes(min_value) + " to " +
                           FormatBytes(max_value) + ")");
        }
        *out = value;
      });
}

void FlagParser::AddDouble(std::string name, double* out, double min_value,
                           double max_value, bool min_exclusive,
                           std::string help) {
  const std::string flag = "--" + name;
  std::ostringstream def;
  def << *out;
  Add(std::move(name), std::move(help), def.str(), true,
      [=](std::string_view text) {
        double value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        const bool below =
            min_exclusive ? value <= min_value : value < min_value;
        if (text.empty() || ec != std::errc() || ptr != end ||
            !std::isfinite(value) || below || value > max_value) {
          std::ostringstream msg;
          msg << flag << ": invalid value '" << text
              << "' (expected a number in " << (min_exclusive ? "(" : "[")
              << min_value << ", " << max_value << "])";
          throw UsageError(msg.str());
        }
        *out = value;
      });
}

void FlagParser::AddString(std::string name, std::string* out,
                           std::string help) {
  const std::string flag = "--" + name;
  Add(std::move(name), std::move(help), *out, true, [=](std::string_view text) {
    if (text.empty()) throw UsageError(flag + ": empty value");
    *out = std::string(text);
  });
}

void FlagParser::AddList(std::string name, std::vector<std::string>* out,
                         std::string help) {
  const std::string flag = "--" + name;
  Add(std::move(name), std::move(help), JoinList(*out), true,
      [=](std::string_view text) { *out = SplitList(flag, text); });
}

void FlagParser::AddIntList(std::string name, std::vector<std::int64_t>* out,
                            std::int64_t min_value, std::int64_t max_value,
                            std::string help) {
  const std::string flag = "--" + name;
  Add(std::move(name), std::move(help), JoinList(*out), true,
      [=](std::string_view text) {
        std::vector<std::int64_t> values;
        for (const std::string& item : SplitList(flag, text)) {
          values.push_back(ParseIntValue(flag, item, min_value, max_value));
        }
        *out = std::move(values);
      });
}

void FlagParser::AddSwitch(std::string name, bool* out, std::string help) {
  Add(std::move(name), std::move(help), "", false,
      [=](std::string_view) { *out = true; });
}

bool FlagParser::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return false;
    if (!arg.starts_with("--")) {
      throw UsageError("unexpected argument '" + std::string(arg) +
                       "' (flags start with --; see --help)");
    }
    std::string_view name = arg.substr(2);
    std::optional<std::string_view> value;
    if (const std::size_t eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const auto flag =
        std::find_if(flags_.begin(), flags_.end(),
                     [&](const Flag& f) { return f.name == name; });
    if (flag == flags_.end()) {
      throw UsageError("unknown flag --" + std::string(name) + " (see --help)");
    }
    if (!flag->takes_value) {
      if (value) {
        throw UsageError("--" + flag->name + " takes no value");
      }
      flag->set("");
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) {
        throw UsageError("--" + flag->name + ": missing value");
      }
      value = argv[++i];
    }
    flag->set(*value);
  }
  return true;
}

std::string FlagParser::Usage() const {
  std::ostringstream out;
  out << "usage: mpirun -np N " << program_ << " [flags]\n" << summary_ << "\n";
  for (const Flag& f : flags_) {
    std::string lhs = "  --" + f.name + (f.takes_value ? " VALUE" : "");
    out << lhs << std::string(lhs.size() < 26 ? 26 - lhs.size() : 1, ' ')
        << f.help;
    if (f.takes_value && !f.default_text.empty()) {
      out << " (default " << f.default_text << ")";
    }
    out << "\n";
  }
  return out.str();
}

std::int64_t ParseByteCount(std::string_view flag, std::string_view text) {
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
  const std::int64_t limit = (std::int64_t{1} << 40) / unit;
  try {
    return ParseIntValue(flag, digits, 0, limit) * unit;
  } catch (const UsageError&) {
    throw UsageError(std::string(flag) + ": invalid value '" +
                     std::string(text) +
                     "' (expected a byte count such as 4096, 4K, 16M or 1G, "
                     "at most 1 TiB)");
  }
}

std::string FormatBytes(std::int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  if (value == std::floor(value)) {
    std::snprintf(buf, sizeof buf, "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", value, kUnits[unit]);
  }
  return buf;
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw std::runtime_error(
        "the MPI library does not provide MPI_THREAD_MULTIPLE");
  }
}

MpiSession::~MpiSession() { MPI_Finalize(); }

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

double NowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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

void WaitOk(const Handle& handle, std::string_view what) {
  const Status status = handle.Wait();
  if (!status.ok()) {
    throw std::runtime_error(std::string(what) + ": " + status.ToString());
  }
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  if (values.size() % 2 == 1) return values[mid];
  return 0.5 * (values[mid - 1] + values[mid]);
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

void CheckAlgorithms(std::string_view flag,
                     const std::vector<std::string>& algorithms) {
  for (const std::string& algorithm : algorithms) {
    if (std::find(AllreduceAlgorithms().begin(), AllreduceAlgorithms().end(),
                  algorithm) == AllreduceAlgorithms().end()) {
      std::ostringstream msg;
      msg << flag << ": unknown allreduce algorithm '" << algorithm
          << "' (this build has:";
      for (std::string_view choice : AllreduceAlgorithms()) {
        msg << " " << choice;
      }
      msg << ")";
      throw UsageError(msg.str());
    }
  }
}

std::string IndexedName(std::string_view prefix, std::int64_t index) {
  std::string name(prefix);
  name += std::to_string(index);
  return name;
}

void JsonRow::Key(std::string_view key) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"";
  body_ += key;
  body_ += "\":";
}

JsonRow& JsonRow::Add(std::string_view key, std::string_view value) {
  Key(key);
  body_ += "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') body_ += '\\';
    body_ += c;
  }
  body_ += "\"";
  return *this;
}

JsonRow& JsonRow::Add(std::string_view key, std::int64_t value) {
  Key(key);
  body_ += std::to_string(value);
  return *this;
}

JsonRow& JsonRow::Add(std::string_view key, double value) {
  Key(key);
  if (!std::isfinite(value)) {  // JSON has no inf / nan
    body_ += "null";
    return *this;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  body_ += buf;
  return *this;
}

}  // namespace hvdtune::bench
