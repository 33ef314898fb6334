// SPDX-License-Identifier: Apache-2.0
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tierflow/topology.h"

namespace tierflow {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool ParseInt(std::string_view s, int& out) {
  if (s.empty() || s.size() > 6) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

// "8-15 hbm", "8-15=hbm", "3 cxl"
Status ParseEntry(std::string_view entry, const std::string& where, TierOverrides& out) {
  std::size_t sep = entry.find_first_of("= \t");
  if (sep == std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("{}: entry '{}' has no kind; write NODES=KIND, e.g. 8-15=hbm", where, entry));
  }
  std::string_view nodes = Trim(entry.substr(0, sep));
  std::string_view kind_text = Trim(entry.substr(sep + 1));
  if (!kind_text.empty() && kind_text.front() == '=') kind_text = Trim(kind_text.substr(1));
  Result<TierKind> kind = ParseTierKind(kind_text);
  if (!kind.ok())
    return Status::InvalidArgument(fmt::format("{}: {}", where, kind.status().message()));
  int lo = 0, hi = 0;
  std::size_t dash = nodes.find('-');
  bool good = dash == std::string_view::npos
                  ? (ParseInt(nodes, lo) && (hi = lo, true))
                  : ParseInt(nodes.substr(0, dash), lo) && ParseInt(nodes.substr(dash + 1), hi);
  if (!good || hi < lo) {
    return Status::InvalidArgument(
        fmt::format("{}: node list '{}' is not a node number or range like 8-15", where, nodes));
  }
  for (int n = lo; n <= hi; ++n) out.Set(n, *kind);
  return Status::Ok();
}

}  // namespace

std::string_view TierKindName(TierKind kind) {
  switch (kind) {
    case TierKind::kDram:
      return "dram";
    case TierKind::kHbm:
      return "hbm";
    case TierKind::kCxl:
      return "cxl";
    case TierKind::kNvm:
      return "nvm";
    case TierKind::kStorage:
      return "storage";
    case TierKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

Result<TierKind> ParseTierKind(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (TierKind k :
       {TierKind::kDram, TierKind::kHbm, TierKind::kCxl, TierKind::kNvm, TierKind::kStorage}) {
    if (lower == TierKindName(k)) return k;
  }
  return Status::InvalidArgument(
      fmt::format("unknown tier kind '{}': use dram, hbm, cxl, nvm or storage", name));
}

Result<TierOverrides> TierOverrides::Parse(std::string_view text) {
  TierOverrides out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find_first_of(",\n", start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view entry = text.substr(start, end - start);
    if (std::size_t hash = entry.find('#'); hash != std::string_view::npos)
      entry = entry.substr(0, hash);
    entry = Trim(entry);
    if (!entry.empty()) {
      if (Status s = ParseEntry(entry, "tier override", out); !s.ok()) return s;
    }
    start = end + 1;
  }
  return out;
}

Result<TierOverrides> TierOverrides::LoadFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(
        fmt::format("tier config '{}' is {}: give a file of 'NODES KIND' lines", path,
                    S_ISDIR(st.st_mode) ? "a directory" : "not a regular file"));
  }
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound(fmt::format("cannot read tier config file '{}'", path));
  }
  TierOverrides out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string_view entry = line;
    if (std::size_t hash = entry.find('#'); hash != std::string_view::npos)
      entry = entry.substr(0, hash);
    entry = Trim(entry);
    if (entry.empty()) continue;
    if (Status s = ParseEntry(entry, fmt::format("{}:{}", path, number), out); !s.ok()) return s;
  }
  return out;
}

Result<TierOverrides> TierOverrides::FromEnvironment() {
  TierOverrides out;
  if (const char* file = std::getenv("TIERFLOW_TIER_CONFIG"); file != nullptr && *file != '\0') {
    Result<TierOverrides> f = LoadFile(file);
    if (!f.ok()) return Status(f.status().code(), "TIERFLOW_TIER_CONFIG: " + f.status().message());
    out.Merge(*f);
  }
  if (const char* inline_text = std::getenv("TIERFLOW_TIERS"); inline_text != nullptr) {
    Result<TierOverrides> e = Parse(inline_text);
    if (!e.ok()) return Status(e.status().code(), "TIERFLOW_TIERS: " + e.status().message());
    out.Merge(*e);
  }
  return out;
}

void TierOverrides::Merge(const TierOverrides& other) {
  for (const auto& [node, kind] : other.kinds_) kinds_[node] = kind;
}

}  // namespace tierflow
