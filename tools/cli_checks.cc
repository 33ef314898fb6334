// SPDX-License-Identifier: Apache-2.0
#include "tools/cli_checks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "common/own_file.h"

namespace tierflow::tools {

namespace {

// The length of the valid UTF-8 sequence at text[i] that encodes no C1 control, or 0.
std::size_t PrintableSequence(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  const std::size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return 0;
  }
  if (c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) return 0;  // U+0080..U+009F
  return n;
}

}  // namespace

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t') {
      out.push_back(text[i++]);
      continue;
    }
    if (const std::size_t n = c >= 0x80 ? PrintableSequence(text, i) : 0; n != 0) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    out += fmt::format("\\x{:02x}", c);
    ++i;
  }
  return out;
}
namespace {

std::string Quote(std::string_view v) { return fmt::format("'{}'", v); }

// Empty when `text` is a decimal integer in [min, max], else what is wrong.
template <typename T>
std::string IntegerProblem(std::string_view text, T min, T max) {
  const auto range = fmt::format("an integer from {} to {}", min, max);
  T v{};
  const char* end = text.data() + text.size();
  const bool digits =
      !text.empty() && std::all_of(text.begin() + (text[0] == '-' ? 1 : 0), text.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || text == "-") return fmt::format("{} is not {}", Quote(text), range);
  if (std::is_unsigned_v<T> && text[0] == '-')
    return fmt::format("{} is negative: give {}", Quote(text), range);
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && (v < min || v > max))) {
    return fmt::format("{} is out of range: give {}", Quote(text), range);
  }
  if (ec != std::errc() || p != end) return fmt::format("{} is not {}", Quote(text), range);
  return {};
}

std::string SizeProblem(std::string_view text, std::uint64_t min, std::uint64_t max) {
  const auto range = fmt::format("{} to {}", bench::FormatSize(min), bench::FormatSize(max));
  Result<std::size_t> s = bench::ParseSize(text);
  if (!s.ok()) return fmt::format("{}; give a size from {}", s.status().message(), range);
  if (*s < min || *s > max)
    return fmt::format("{} is out of range: give a size from {}", Quote(text), range);
  return {};
}

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  }
  return out;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

CLI::Validator IntegerIn(long long min, long long max) {
  return CLI::Validator([=](std::string& v) { return IntegerProblem<long long>(v, min, max); },
                        fmt::format("INT in {}..{}", min, max));
}

CLI::Validator UnsignedIn(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator([=](std::string& v) { return IntegerProblem<std::uint64_t>(v, min, max); },
                        fmt::format("UINT in {}..{}", min, max));
}

CLI::Validator IntegerListIn(long long min, long long max) {
  return CLI::Validator(
      [=](std::string& v) {
        for (const std::string& item : SplitList(v)) {
          std::string p = IntegerProblem<long long>(item, min, max);
          if (!p.empty()) return fmt::format("in the list {}: {}", Quote(v), p);
        }
        return std::string();
      },
      fmt::format("LIST of INT in {}..{}", min, max));
}

CLI::Validator RealIn(double min, double max) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        const auto range = fmt::format("a number from {} to {}", min, max);
        char* end = nullptr;
        errno = 0;
        const double d = v.empty() ? 0 : std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || !std::isfinite(d)) {
          return fmt::format("{} is not {} (no nan, inf or overflow)", Quote(v), range);
        }
        if (d < min || d > max) return fmt::format("{} is out of range: give {}", Quote(v), range);
        return {};
      },
      fmt::format("NUMBER in {}..{}", min, max));
}

CLI::Validator SizeIn(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [=](std::string& v) { return SizeProblem(v, min, max); },
      fmt::format("SIZE in {}..{}", bench::FormatSize(min), bench::FormatSize(max)));
}

CLI::Validator SizeListIn(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [=](std::string& v) {
        for (const std::string& item : SplitList(v)) {
          std::string p = SizeProblem(item, min, max);
          if (!p.empty()) return fmt::format("in the list {}: {}", Quote(v), p);
        }
        return std::string();
      },
      "LIST of SIZE");
}

CLI::Validator OneOf(std::string noun, std::vector<std::string> words) {
  return CLI::Validator(
      [=](std::string& v) {
        if (std::find(words.begin(), words.end(), v) != words.end()) return std::string();
        return fmt::format("unknown {} {}: use {}", noun, Quote(v), Joined(words));
      },
      "one of " + Joined(words));
}

CLI::Validator ListOf(std::string noun, std::vector<std::string> words) {
  return CLI::Validator(
      [=](std::string& v) {
        for (const std::string& item : SplitList(v)) {
          if (std::find(words.begin(), words.end(), item) == words.end()) {
            return fmt::format("unknown {} {} in {}: use a comma-separated list of {}", noun,
                               Quote(item), Quote(v), Joined(words));
          }
        }
        return std::string();
      },
      "LIST of " + Joined(words));
}

CLI::Validator NotEmpty(std::string what) {
  return CLI::Validator(
      [=](std::string& v) {
        return v.empty() ? fmt::format("the value is empty: give {}", what) : std::string();
      },
      "TEXT");
}

CLI::Validator ReadableFile(std::string what) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        struct stat st {};
        const std::string cannot = fmt::format("cannot read {} {}", what, Quote(v));
        if (v.empty()) return fmt::format("the name of the {} is empty", what);
        if (stat(v.c_str(), &st) != 0) {
          return fmt::format("{}: {}", cannot,
                             errno == ENOENT ? "no such file" : std::strerror(errno));
        }
        if (S_ISDIR(st.st_mode)) return fmt::format("{}: it is a directory; give a file", cannot);
        if (!S_ISREG(st.st_mode)) return fmt::format("{}: not a regular file", cannot);
        if (access(v.c_str(), R_OK) != 0)
          return fmt::format("{}: {}", cannot, std::strerror(errno));
        return {};
      },
      "FILE");
}

CLI::Validator ExistingDirectory() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        struct stat st {};
        if (v.empty()) return "the directory name is empty";
        if (stat(v.c_str(), &st) != 0) {
          return errno == ENOENT ? fmt::format("{}: no such directory", Quote(v))
                                 : fmt::format("{}: {}", Quote(v), std::strerror(errno));
        }
        if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", Quote(v));
        return {};
      },
      "DIR");
}

std::string WritableDirectoryProblem(const std::string& dir) {
  std::string probe = dir + "/.tierflow-write-test-XXXXXX";
  const int fd = mkostemp(probe.data(), O_CLOEXEC);
  if (fd < 0) return fmt::format("cannot create files in {}: {}", Quote(dir), std::strerror(errno));
  RemoveIfStill(fd, probe);
  close(fd);
  return {};
}

namespace {

// Why `v` cannot be written as a file (a directory, a missing directory, no permission, a
// symbolic link or something else than a file), or empty. An existing file is opened for
// writing without changing it; a new one is created (O_EXCL, never through a link) and
// removed, which root's access() would not tell.
std::string NewFileProblem(const std::string& v) {
  if (v.empty()) return "an empty file name: give a path";
  if (IsDirectory(v)) return fmt::format("{} is a directory: give a file name", Quote(v));
  const std::size_t slash = v.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : v.substr(0, slash);
  if (!IsDirectory(dir))
    return fmt::format("the directory {} does not exist: create it first", Quote(dir));
  int fd = open(v.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  const bool created = fd >= 0;
  if (!created && errno == EEXIST) {
    fd = open(v.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ELOOP) {
      return fmt::format("{} is a symbolic link: give the path of the file it points to", Quote(v));
    }
    struct stat st {};
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
      close(fd);
      return fmt::format("{} exists and is not a regular file: give a file name", Quote(v));
    }
  }
  if (fd < 0) return fmt::format("cannot write {}: {}", Quote(v), std::strerror(errno));
  if (created) RemoveIfStill(fd, v);
  close(fd);
  return {};
}

}  // namespace

CLI::Validator NewPng() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        std::string lower = v;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        if (lower.size() < 5 || lower.substr(lower.size() - 4) != ".png") {
          return fmt::format("{}: the plot is a PNG image; give a file name ending in .png",
                             Quote(v));
        }
        return NewFileProblem(v);
      },
      "FILE.png");
}

CLI::Validator WritableDirectory() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (!IsDirectory(v)) return fmt::format("{} is not an existing directory", Quote(v));
        return WritableDirectoryProblem(v);
      },
      "DIR");
}

CLI::Validator WritableFile() {
  return CLI::Validator([](std::string& v) -> std::string { return NewFileProblem(v); }, "FILE");
}

}  // namespace tierflow::tools
