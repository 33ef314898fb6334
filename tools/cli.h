// SPDX-License-Identifier: Apache-2.0
// What every command of the tool shares: how it fails (exit statuses and the one error
// prefix), how it registers and runs, its --quiet flag, and the help, completion and manual
// page generated from the commands' own definitions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tierflow/status.h"

namespace tierflow::tools {

// Exit statuses: 0 the command did its work (or printed help), 1 it failed, 2 the command line
// is wrong (an unknown option or word, a bad value, a missing command).
inline constexpr int kFailureExit = 1;
inline constexpr int kUsageExit = 2;
// "tierflow: error: MESSAGE" on stderr (control characters escaped); returns 1 or 2.
int Fail(const Status& s);
int UsageError(const std::string& message);
inline int ExitFor(const Status& s) { return s.ok() ? 0 : Fail(s); }

inline constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
inline constexpr std::uint64_t kPiB = std::uint64_t{1} << 50;
// A comma-separated list of integers already checked by IntegerListIn.
std::vector<int> IntList(const std::string& text);

// A command of the tool: its options live on `cmd`; Run is called when the line named it.
class Command {
 public:
  virtual ~Command() = default;
  virtual int Run() = 0;
  CLI::App* cmd = nullptr;
};
using Commands = std::vector<std::unique_ptr<Command>>;

// The benchmarks under `bench` (bench_cli.cc) and the other commands (commands_cli.cc).
void AddBenchCommands(CLI::App& bench, Commands& out);
void AddCommands(CLI::App& app, Commands& out);

// -q, --quiet (and the older --no-progress): no status line on stderr. Without it, a command
// that runs long shows one, on a terminal only.
void AddQuiet(CLI::App* cmd, bool& quiet);

// An option's description with its default, and the form of its value ("SIZE in 1B..1GiB";
// empty for a flag): as help, completion and the manual page show them.
std::string DescribeOption(const CLI::Option* opt);
std::string ValueForm(const CLI::Option* opt);

// Help text: every option with its value's form and its default, the program named
// "tierflow", no parser artefacts.
std::shared_ptr<CLI::Formatter> MakeHelpFormatter();
// The command `help [WORD...]`: prints the help of the command the words name. Errors: words
// that name no command.
Result<std::string> HelpFor(CLI::App& app, const std::vector<std::string>& words);
// A bash completion script and a manual page (troff, section 1) for `app`, both generated
// from its definition.
std::string BashCompletion(const CLI::App& app);
std::string ManPage(const CLI::App& app, const std::string& version);

}  // namespace tierflow::tools
