// SPDX-License-Identifier: Apache-2.0
#include "tools/cli.h"

#include <cstdio>
#include <cstring>
#include <functional>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "tools/cli_checks.h"

namespace tierflow::tools {

namespace {

// The library's messages name its API ("declare it with FileMode::kReplace"); on the command
// line the flag that sets it is the fix, and a C++ name in parentheses says nothing to the user.
std::string ForCommandLine(std::string message) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"FileMode::kReplace", "--overwrite"},
      {"FileMode::kModify", "--modify"},
      {"set extsort::Config::overwrite", "give --overwrite"}};
  for (auto [api, flag] : kFlags) {
    for (size_t at = message.find(api); at != std::string::npos;
         at = message.find(api, at + std::strlen(flag))) {
      message.replace(at, std::strlen(api), flag);
    }
  }
  static const std::regex bare(R"( \([A-Z]\w*::\w+\))");
  return std::regex_replace(message, bare, "");
}

}  // namespace

int Fail(const Status& s) {
  std::fprintf(stderr, "tierflow: error: %s\n", Printable(ForCommandLine(s.message())).c_str());
  return kFailureExit;
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "tierflow: error: %s\n", Printable(ForCommandLine(message)).c_str());
  return kUsageExit;
}

std::vector<int> IntList(const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : SplitList(text)) out.push_back(std::stoi(item));
  return out;
}

void AddQuiet(CLI::App* cmd, bool& quiet) {
  cmd->add_flag("-q,--quiet,--no-progress", quiet,
                "No status line on stderr (shown only on a terminal)");
}

namespace {

bool TakesValue(const CLI::Option* opt) { return opt->get_type_size() != 0; }

// "--no-pin{false}" -> "--no-pin": CLI11 shows a negated flag's value in its name.
std::string Names(const CLI::Option* opt) {
  return std::regex_replace(opt->get_name(false, true), std::regex(R"(\{[^}]*\})"), "");
}

class HelpFormatter final : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(34); }
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    return positional ? opt->get_name(true, false) : Names(opt);
  }
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!TakesValue(opt)) return "";
    return " " + ValueForm(opt) + (opt->get_required() ? " (required)" : "");
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    return DescribeOption(opt);
  }
};

}  // namespace

// "TEXT:SIZE in 4KiB..16TiB" -> "SIZE in 4KiB..16TiB": the parser's own type word goes where a
// check names the value's form.
std::string ValueForm(const CLI::Option* opt) {
  if (!TakesValue(opt)) return "";
  std::string t = opt->get_type_name();
  for (const char* base : {"TEXT:", "UINT:", "INT:", "FLOAT:", "BOOLEAN:"}) {
    if (t.starts_with(base)) return t.substr(std::string_view(base).size());
  }
  return t;
}

// The default as the description words it ("(default: the CPUs)"), else as captured.
std::string DescribeOption(const CLI::Option* opt) {
  const std::string& text = opt->get_description();
  const std::string d = TakesValue(opt) ? opt->get_default_str() : std::string();
  if (d.empty() || text.find("(default") != std::string::npos) return text;
  return text + " (default: " + d + ")";
}

std::shared_ptr<CLI::Formatter> MakeHelpFormatter() { return std::make_shared<HelpFormatter>(); }

Result<std::string> HelpFor(CLI::App& app, const std::vector<std::string>& words) {
  CLI::App* at = &app;
  std::string named = app.get_name();  // "tierflow", then "tierflow bench", ...
  for (const std::string& w : words) {
    const std::vector<CLI::App*> found =
        at->get_subcommands([&w](CLI::App* s) { return s->get_name() == w && w != "help"; });
    if (found.empty()) {
      const std::string lists = app.get_name() + " help" + named.substr(app.get_name().size());
      return Status::InvalidArgument(
          fmt::format("help: '{}' is no command of {} (`{}` lists them)", w, named, lists));
    }
    named += " " + w;
    at = found.front();
  }
  return at->get_formatter()->make_help(at, named, CLI::AppFormatMode::Normal);
}

}  // namespace tierflow::tools
