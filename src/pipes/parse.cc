// SPDX-License-Identifier: Apache-2.0
// Locators as the command line spells them.
#include <charconv>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tierflow/pipe_runtime.h"
#include "tierflow/size.h"

namespace tierflow {

namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

Result<int> ParseNode(std::string_view spec, std::string_view text) {
  int v = -1;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 0) {
    return Status::InvalidArgument(
        fmt::format("locator '{}': '{}' is not a NUMA node number", spec, text));
  }
  return v;
}

const char* kSpellings =
    "use dram[:NODE[:SIZE]], hbm[:NEAR_NODE[:SIZE]], cxl[:NODE[:SIZE]], node:N[:SIZE], "
    "file:PATH[:OFFSET[:LENGTH]], spill:A,B,... or tiered:SIZE[:DIR]";

// "file:PATH[:OFFSET[:LENGTH]]": the last one or two parts are numbers when they parse as sizes.
Result<Locator> ParseFile(PipeRuntime& rt, std::string_view spec, FileMode mode,
                          std::size_t default_size) {
  std::vector<std::string_view> parts = Split(spec.substr(5), ':');
  std::uint64_t nums[2] = {0, 0};
  int found = 0;
  while (found < 2 && parts.size() > 1 && ParseSize(parts.back()).ok()) {
    nums[found++] = *ParseSize(parts.back());
    parts.pop_back();
  }
  std::string path;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i != 0) path.push_back(':');
    path.append(parts[i]);
  }
  if (path.empty())
    return Status::InvalidArgument(fmt::format("locator '{}': no path; {}", spec, kSpellings));
  const std::uint64_t offset = found == 2 ? nums[1] : found == 1 ? nums[0] : 0;
  std::uint64_t length = found == 2 ? nums[0] : 0;
  const bool creates = mode == FileMode::kCreate || mode == FileMode::kReplace;
  if (length == 0 && creates) length = default_size;
  return rt.File(path, offset, length, mode);
}

Result<Locator> ParseMemory(PipeRuntime& rt, std::string_view spec, std::size_t default_size) {
  std::vector<std::string_view> parts = Split(spec, ':');
  if (parts.size() > 3) {
    return Status::InvalidArgument(
        fmt::format("locator '{}': too many parts; {}", spec, kSpellings));
  }
  int node = -1;
  if (parts.size() >= 2) {
    Result<int> n = ParseNode(spec, parts[1]);
    if (!n.ok()) return n.status();
    node = *n;
  }
  std::uint64_t size = default_size;
  if (parts.size() == 3) {
    Result<std::uint64_t> s = ParseSize(parts[2]);
    if (!s.ok())
      return Status::InvalidArgument(fmt::format("locator '{}': {}", spec, s.status().message()));
    size = *s;
  }
  if (size == 0) {
    return Status::InvalidArgument(fmt::format("locator '{}' needs a size here, e.g. {}:{}:64MiB",
                                               spec, parts[0], node < 0 ? 0 : node));
  }
  if (parts[0] == "node") {
    if (node < 0) return Status::InvalidArgument(fmt::format("locator '{}': node:N needs N", spec));
    return rt.Node(node, size);
  }
  Result<TierKind> tier = ParseTierKind(parts[0]);
  if (!tier.ok() || *tier == TierKind::kStorage || *tier == TierKind::kUnknown) {
    return Status::InvalidArgument(
        fmt::format("locator '{}': unknown kind '{}'; {}", spec, parts[0], kSpellings));
  }
  return rt.Memory(*tier, node, size);
}

// "tiered:SIZE[:DIR]": every memory tier, then a file in DIR (which may hold ':').
Result<Locator> ParseTiered(PipeRuntime& rt, std::string_view spec, std::size_t default_size) {
  std::string_view rest = spec.substr(7);
  const std::size_t colon = rest.find(':');
  TieredOptions o;
  o.capacity = default_size;
  std::string_view size = rest.substr(0, colon);
  if (!size.empty()) {
    Result<std::uint64_t> n = ParseSize(size);
    if (!n.ok()) {
      return Status::InvalidArgument(fmt::format("locator '{}': {}", spec, n.status().message()));
    }
    o.capacity = *n;
  }
  if (o.capacity == 0) {
    return Status::InvalidArgument(
        fmt::format("locator '{}' needs a size, e.g. tiered:64GiB:/var/tmp", spec));
  }
  if (colon != std::string_view::npos) o.directories.emplace_back(rest.substr(colon + 1));
  return rt.Tiered(o);
}

}  // namespace

Result<Locator> PipeRuntime::Parse(std::string_view spec, FileMode file_mode,
                                   std::size_t default_size) {
  if (spec.starts_with("file:")) return ParseFile(*this, spec, file_mode, default_size);
  if (spec.starts_with("tiered:") || spec == "tiered") {
    return ParseTiered(*this, spec.size() > 6 ? spec : "tiered:", default_size);
  }
  if (spec.starts_with("spill:")) {
    std::vector<Locator> members;
    for (std::string_view part : Split(spec.substr(6), ',')) {
      Result<Locator> m = Parse(part, file_mode, default_size);
      if (!m.ok()) return m.status();
      members.push_back(std::move(*m));
    }
    return Spill(members);
  }
  if (spec.empty()) return Status::InvalidArgument(fmt::format("empty locator; {}", kSpellings));
  return ParseMemory(*this, spec, default_size);
}

}  // namespace tierflow
