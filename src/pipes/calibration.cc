#include "tierflow/calibration.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tierflow {

std::string CalibrationEndpoint(TierKind tier, int node) {
  return fmt::format("{}:{}", TierKindName(tier), node);
}

std::optional<CalibrationEntry> Calibration::Find(Mechanism m, const std::string& from,
                                                  const std::string& to) const {
  for (const CalibrationEntry& e : entries_) {
    if (e.mechanism == m && e.from == from && e.to == to) return e;
  }
  return std::nullopt;
}

void Calibration::Set(const CalibrationEntry& e) {
  for (CalibrationEntry& old : entries_) {
    if (old.mechanism == e.mechanism && old.from == e.from && old.to == e.to) {
      old = e;
      return;
    }
  }
  entries_.push_back(e);
}

std::string Calibration::DefaultPath() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string dir = xdg != nullptr && *xdg != '\0'     ? xdg
                    : home != nullptr && *home != '\0' ? std::string(home) + "/.cache"
                                                       : std::string("/tmp");
  return dir + "/tierflow/calibration.json";
}

std::string Calibration::ThisMachine() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("model name")) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return fmt::format("{} ({}, {} CPUs)", host, model, sysconf(_SC_NPROCESSORS_ONLN));
}

namespace {

CalibrationEntry EntryFromJson(const nlohmann::json& j, std::size_t i) {
  CalibrationEntry e;
  Result<Mechanism> m = ParseMechanism(j.at("mechanism").get<std::string>());
  if (!m.ok()) throw std::runtime_error(fmt::format("entry {}: {}", i, m.status().message()));
  e.mechanism = *m;
  e.from = j.at("from").get<std::string>();
  e.to = j.at("to").get<std::string>();
  e.gbps = j.at("gbps").get<double>();
  e.latency_us = j.value("latency_us", 0.0);
  if (!(e.gbps > 0)) throw std::runtime_error(fmt::format("entry {}: gbps must be above 0", i));
  return e;
}

}  // namespace

Result<Calibration> Calibration::Load(const std::string& path, bool any_machine) {
  std::ifstream in(path);
  if (!in) return Status::IoError(fmt::format("cannot read calibration {}", path));
  Calibration c;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    c.machine_ = j.at("machine").get<std::string>();
    c.measured_at_ = j.value("measured_at", "");
    const nlohmann::json& entries = j.at("entries");
    for (std::size_t i = 0; i < entries.size(); ++i) c.Set(EntryFromJson(entries[i], i));
  } catch (const std::exception& e) {
    return Status::Invalid(
        fmt::format("calibration {} is malformed ({}): remove it or run `tierflow pipes calibrate`",
                    path, e.what()));
  }
  if (!any_machine && c.machine_ != ThisMachine()) {
    return Status::Unsupported(fmt::format(
        "calibration {} describes another machine ({}), not this one ({}): not used; run "
        "`tierflow pipes calibrate`",
        path, c.machine_, ThisMachine()));
  }
  c.source_ = path;
  return c;
}

Status Calibration::Save(const std::string& path) const {
  nlohmann::json j;
  j["machine"] = machine_;
  j["measured_at"] = measured_at_;
  j["entries"] = nlohmann::json::array();
  for (const CalibrationEntry& e : entries_) {
    j["entries"].push_back({{"mechanism", std::string(MechanismName(e.mechanism))},
                            {"from", e.from},
                            {"to", e.to},
                            {"gbps", e.gbps},
                            {"latency_us", e.latency_us}});
  }
  std::error_code ec;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out.flush()) return Status::IoError(fmt::format("cannot write calibration {}", tmp));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return Status::IoError(fmt::format("cannot write calibration {}: {}", path, ec.message()));
  return Status::Ok();
}

}  // namespace tierflow
