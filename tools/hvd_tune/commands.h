// The subcommands of hvd-tune; each adds itself to the top-level app and
// returns what runs it.
#pragma once

#include <CLI/CLI.hpp>

#include "common.h"

namespace hvdtune::cli {

Command AddKnobsCommand(CLI::App& app);
Command AddShowCommand(CLI::App& app);
Command AddBestCommand(CLI::App& app);
Command AddExportCommand(CLI::App& app);
Command AddImportCommand(CLI::App& app);
Command AddRunCommand(CLI::App& app);
Command AddSweepCommand(CLI::App& app, int argc, char** argv);
Command AddPlotCommand(CLI::App& app);
Command AddDoctorCommand(CLI::App& app);
Command AddStoreCommand(CLI::App& app);

}  // namespace hvdtune::cli
