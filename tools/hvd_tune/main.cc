// hvd-tune: offline sweeps, the config store, the knob table, pictures and
// a health check. Exit status: 0 ok, 1 failure, 2 usage error.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "hvdtune/status.h"
#include "launcher.h"

namespace {

using hvdtune::cli::Command;

int Main(int argc, char** argv) {
  // The arguments as given; then a store password (--db URI) goes from this
  // process's command line, which every local user can read in ps.
  std::vector<std::string> args(argv + 1, argv + argc);
  hvdtune::cli::MaskPasswordArguments(argc, argv);
  CLI::App app(
      "hvd-tune: tune hvdtune's knobs offline, inspect and move the config "
      "store, plot what the tuner did, check the setup.",
      "hvd-tune");
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", HVDTUNE_VERSION);
  app.footer(
      "Exit status: 0 ok, 1 failure, 2 usage error. `hvd-tune COMMAND "
      "--help` describes each command.");
  std::vector<Command> commands = {
      hvdtune::cli::AddSweepCommand(app, argc, argv),
      hvdtune::cli::AddRunCommand(app),
      hvdtune::cli::AddShowCommand(app),
      hvdtune::cli::AddBestCommand(app),
      hvdtune::cli::AddExportCommand(app),
      hvdtune::cli::AddImportCommand(app),
      hvdtune::cli::AddKnobsCommand(app),
      hvdtune::cli::AddPlotCommand(app),
      hvdtune::cli::AddDoctorCommand(app),
      hvdtune::cli::AddStoreCommand(app),
  };
  const bool rank0 = hvdtune::cli::LauncherRank() == 0;
  // Horovod users write -np (one dash); CLI11 knows only --np. The job's
  // own arguments after "--" are left alone.
  for (std::string& a : args) {
    if (a == "--") break;
    if (a == "-np") a = "--np";
  }
  if (!args.empty() && !args.front().starts_with("-") &&
      std::none_of(commands.begin(), commands.end(), [&](const Command& c) {
        return c.app->get_name() == args.front();
      })) {
    if (rank0) {
      fmt::print(stderr,
                 "hvd-tune: unknown command '{}' (expected sweep, run, show, "
                 "best, export, import, knobs, plot, doctor or store)\n",
                 args.front());
    }
    return hvdtune::cli::kExitUsage;
  }
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    if (rank0) app.exit(e);
    return hvdtune::cli::kExitOk;
  } catch (const CLI::CallForAllHelp& e) {
    if (rank0) app.exit(e);
    return hvdtune::cli::kExitOk;
  } catch (const CLI::CallForVersion& e) {
    if (rank0) app.exit(e);
    return hvdtune::cli::kExitOk;
  } catch (const CLI::ParseError& e) {
    if (rank0) {
      fmt::print(stderr, "hvd-tune: {}\n", e.what());
      fmt::print(stderr, "Run with --help for more information.\n");
    }
    return hvdtune::cli::kExitUsage;
  }
  for (const Command& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const hvdtune::cli::UsageError& e) {
      if (rank0)
        fmt::print(stderr, "hvd-tune {}: {}\n", c.app->get_name(), e.what());
      return hvdtune::cli::kExitUsage;
    } catch (const hvdtune::ConfigError& e) {
      if (rank0)
        fmt::print(stderr, "hvd-tune {}: {}\n", c.app->get_name(), e.what());
      return hvdtune::cli::kExitUsage;
    } catch (const std::exception& e) {
      if (rank0)
        fmt::print(stderr, "hvd-tune {}: {}\n", c.app->get_name(), e.what());
      return hvdtune::cli::kExitFailure;
    }
  }
  return hvdtune::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
