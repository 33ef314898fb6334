// SPDX-License-Identifier: Apache-2.0
// Checks of command-line values, run by CLI11 while it parses (before any command starts), so
// that a bad value is refused at once with the option's name, the value, and what to give
// instead. CLI11 prefixes each message with the option ("--rows: ...").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace tierflow::tools {

// `text` safe to print on a terminal: control characters (but newline and tab), DEL, C1
// controls and bytes that are not UTF-8 become \xNN, so a value the user gave can never move
// the cursor, retitle the window or hide what came before.
std::string Printable(std::string_view text);

// A whole number written in decimal (no sign for unsigned options, no fraction, no exponent,
// no hexadecimal) within [min, max].
CLI::Validator IntegerIn(long long min, long long max);
CLI::Validator UnsignedIn(std::uint64_t min, std::uint64_t max);
// A comma-separated list of such numbers (no empty items).
CLI::Validator IntegerListIn(long long min, long long max);
// A finite decimal number within [min, max] (not nan, not inf).
CLI::Validator RealIn(double min, double max);
// A size such as 4096, 4KiB, 1MiB (bench/bench_util.h: ParseSize) within [min, max] bytes.
CLI::Validator SizeIn(std::uint64_t min, std::uint64_t max);
CLI::Validator SizeListIn(std::uint64_t min, std::uint64_t max);
// One of the words; a comma-separated list of them (no empty items). `noun` names what a word
// is in the message ("unknown engine 'gpu': use cpu, dsa or dsa-model").
CLI::Validator OneOf(std::string noun, std::vector<std::string> words);
CLI::Validator ListOf(std::string noun, std::vector<std::string> words);
// Any non-empty text (the command checks its form).
CLI::Validator NotEmpty(std::string what);
// A regular file that can be read (`what` names it: "hwloc XML topology"); an existing
// directory.
CLI::Validator ReadableFile(std::string what);
CLI::Validator ExistingDirectory();
// A PNG file to write: the name ends in .png, its directory exists and takes a new file, and
// it is not a directory (tried by creating and removing the file, which root's access() would
// not tell).
CLI::Validator NewPng();
// A file to write (created or replaced): not a directory, in a directory that exists and
// takes a new file.
CLI::Validator WritableFile();
// An existing directory that takes new files.
CLI::Validator WritableDirectory();

// "a,b,,c" -> {"a", "b", "", "c"} (empty items kept, so that checks can refuse them).
std::vector<std::string> SplitList(const std::string& text);

// Whether a file can be created in `dir` (tried, then removed). Empty on success, else why.
std::string WritableDirectoryProblem(const std::string& dir);

}  // namespace tierflow::tools
