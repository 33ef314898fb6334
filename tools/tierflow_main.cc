// SPDX-License-Identifier: Apache-2.0
// The tierflow command-line tool: a dispatcher. The commands define their own options
// (tools/commands_cli.cc, tools/bench_cli.cc); this file builds the tree, parses, checks what
// every command shares, and runs the one the line names.
//
// Every value is checked while the command line is parsed (tools/cli_checks.h), before any
// command starts: a bad value ends the program at once with exit status 2 and a message that
// names the option, the value and what to give instead; a command that fails exits 1.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "bench/python.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/version.h"
#include "tools/cli.h"

namespace {

using tierflow::Result;
using tierflow::Status;
namespace tools = tierflow::tools;
namespace bench = tierflow::bench;
using tools::Fail;
using tools::UsageError;

// TIERFLOW_ISA chooses the CPU engine's kernels; a value that names no ISA is refused for
// every command rather than ignored (empty counts as unset).
Status CheckEnvironment() {
  Result<tierflow::CpuIsa> isa = tierflow::ChooseCpuIsa();  // names an ISA this CPU has
  return isa.ok() ? Status::Ok() : isa.status();
}

// --- the command words ------------------------------------------------------------------

// CLI11 reports an unknown command word as "a subcommand is required"; name it instead.
Status CheckCommandWords(CLI::App& app, CLI::App& bench_cmd, CLI::App& pipes_cmd) {
  if (app.get_subcommands().empty()) {
    std::vector<std::string> rest = app.remaining();
    if (!rest.empty()) {
      return Status::InvalidArgument(
          fmt::format("unknown command '{}': use topology, bench, pipes, sort or qdp "
                      "(tierflow help)",
                      rest.front()));
    }
    return Status::InvalidArgument(
        "no command given: use topology, bench, pipes, sort or qdp (tierflow help)");
  }
  if (bench_cmd.parsed() && bench_cmd.get_subcommands().empty()) {
    std::vector<std::string> rest = bench_cmd.remaining();
    if (!rest.empty()) {
      return Status::InvalidArgument(fmt::format(
          "unknown benchmark '{}': use bench copy, bench submit, "
          "bench cache, bench coherence, bench pipes or bench rma (tierflow help bench)",
          rest.front()));
    }
    return Status::InvalidArgument(
        "bench needs a benchmark: copy, submit, cache, coherence, pipes or rma (tierflow help "
        "bench)");
  }
  if (pipes_cmd.parsed() && pipes_cmd.get_subcommands().empty()) {
    return Status::InvalidArgument(
        "pipes needs a command: explain, copy or calibrate (tierflow help pipes)");
  }
  // Words left over after a command (`topology -- x`, `sort extra`): no command takes any.
  std::vector<std::string> rest = app.remaining();
  for (const std::string& word : bench_cmd.remaining()) rest.push_back(word);
  if (!rest.empty()) {
    return Status::InvalidArgument(fmt::format(
        "unexpected argument '{}': commands take options only, no other words (--help lists "
        "them)",
        rest.front()));
  }
  return Status::Ok();
}

// --plot needs Python with matplotlib, --compare-duckdb with DuckDB and numpy: checked before
// the command runs, not after it.
Status CheckPythonNeeds(CLI::App& app) {
  for (CLI::App* cmd = &app; cmd != nullptr;) {
    for (const auto& [flag, modules] :
         {std::pair{"--plot", "matplotlib"}, std::pair{"--compare-duckdb", "duckdb, numpy"}}) {
      const CLI::Option* o = cmd->get_option_no_throw(flag);
      if (o == nullptr || o->count() == 0) continue;
      if (Status s = bench::CheckPythonModules(modules); !s.ok()) {
        return Status(s.code(), fmt::format("{}: {}", flag, s.message()));
      }
    }
    const std::vector<CLI::App*> subs = cmd->get_subcommands();
    cmd = subs.empty() ? nullptr : subs.front();
  }
  return Status::Ok();
}

// `tierflow help [COMMAND...]` and the generated documents the build installs. Handled before
// the parser sees the line: its words name commands, which the parser would run.
void AddHelp(CLI::App& app) {
  CLI::App* h = app.add_subcommand("help", "Help on a command, e.g. tierflow help bench copy");
  h->add_flag("--bash-completion")->description("Print the bash completion script");
  h->add_flag("--man-page")->description("Print the manual page (troff)");
}

int RunHelp(CLI::App& app, const std::vector<std::string>& words) {
  if (words.size() == 1 && words[0] == "--bash-completion") {
    std::cout << tools::BashCompletion(app);
    return 0;
  }
  if (words.size() == 1 && words[0] == "--man-page") {
    std::cout << tools::ManPage(app, tierflow::Version());
    return 0;
  }
  Result<std::string> text = tools::HelpFor(app, words);
  if (!text.ok()) return UsageError(text.status().message());
  std::cout << *text;
  return 0;
}

void Configure(CLI::App& app) {
  app.name("tierflow");
  app.formatter(tools::MakeHelpFormatter());
  app.set_version_flag("--version,-V", std::string("tierflow ") + tierflow::Version(),
                       "Print the version and exit");
  app.footer(
      "Exit status: 0 when the command did its work, 1 when it failed (the message says why), 2 "
      "when the command line is wrong (an unknown option or word, a bad value). "
      "`tierflow help COMMAND` shows a command's options.");
  app.option_defaults()->always_capture_default();
}

}  // namespace

int main(int argc, char** argv) {
  if (Status s = CheckEnvironment(); !s.ok()) return UsageError(s.message());
  CLI::App app{"move data between memory tiers with copy engines, and measure it"};
  Configure(app);
  tools::Commands commands;
  tools::AddCommands(app, commands);
  CLI::App* bench_cmd = app.add_subcommand("bench", "Benchmarks");
  tools::AddBenchCommands(*bench_cmd, commands);
  AddHelp(app);
  if (argc >= 2 && std::string(argv[1]) == "help") {
    return RunHelp(app, std::vector<std::string>(argv + 2, argv + argc));
  }
  app.allow_extras();  // unknown command words: named by CheckCommandWords
  bench_cmd->allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return UsageError(fmt::format("{} (see tierflow help)", e.what()));
  }
  if (Status s = CheckCommandWords(app, *bench_cmd, *app.get_subcommand("pipes")); !s.ok()) {
    return UsageError(s.message());
  }
  if (Status s = CheckPythonNeeds(app); !s.ok()) return Fail(s);
  for (const std::unique_ptr<tools::Command>& c : commands) {
    if (c->cmd->parsed()) return c->Run();
  }
  return UsageError("no command given: use topology, bench, pipes, sort or qdp (tierflow help)");
}
