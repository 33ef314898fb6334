// SPDX-License-Identifier: Apache-2.0
#include "tierflow/calibration.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/own_file.h"

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

namespace {

// The user's home from the password database, for when HOME is unset; empty when none.
std::string HomeOfUser() {
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(static_cast<std::size_t>(size > 0 ? size : 16384));
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr ||
      pw.pw_dir == nullptr) {
    return "";
  }
  return pw.pw_dir;
}

}  // namespace

std::string Calibration::DefaultPath() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string dir = xdg != nullptr && *xdg == '/'     ? std::string(xdg)
                    : home != nullptr && *home == '/' ? std::string(home) + "/.cache"
                                                      : std::string();
  if (dir.empty()) {
    const std::string user_home = HomeOfUser();
    if (user_home.empty() || user_home == "/") return "";  // no directory of the user's own
    dir = user_home + "/.cache";
  }
  return dir + "/tierflow/calibration.json";
}

Status Calibration::CheckCacheDirectory(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    return Status::NotFound(
        fmt::format("calibration cache directory {}: {}", dir, std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(
        fmt::format("calibration cache directory {} is not a directory", dir));
  }
  if (st.st_uid != geteuid()) {
    return Status::InvalidArgument(fmt::format(
        "calibration cache directory {} belongs to uid {}, not to you (uid {}): another user "
        "could change the figures; remove it, or set XDG_CACHE_HOME to a directory of yours",
        dir, st.st_uid, geteuid()));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::InvalidArgument(fmt::format(
        "calibration cache directory {} can be written by others (mode {:o}): another user "
        "could change the figures; chmod go-w {}",
        dir, st.st_mode & 07777, dir));
  }
  return Status::Ok();
}

Status Calibration::PrepareCacheDirectory(const std::string& path) {
  const std::filesystem::path file(path);
  const std::string tierflow_dir = file.parent_path().string();
  const std::string cache_dir = file.parent_path().parent_path().string();
  // The cache directory is the user's ($XDG_CACHE_HOME, ~/.cache): made if missing, mode 0700.
  if (mkdir(cache_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IoError(fmt::format("cannot create {}: {}", cache_dir, std::strerror(errno)));
  }
  if (mkdir(tierflow_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IoError(fmt::format("cannot create {}: {}", tierflow_dir, std::strerror(errno)));
  }
  return CheckCacheDirectory(tierflow_dir);
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
    return Status::InvalidArgument(
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
  return WriteAtomically(path, j.dump(2) + "\n");
}

// A new file beside `path` made with O_EXCL (never a name someone planted, never through a
// symbolic link), written, synced and renamed over `path`: readers see the old figures or the
// new ones, never a part.
Status Calibration::WriteAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    return Status::IoError(fmt::format("cannot write calibration {}: {} (choose another place)",
                                       path, std::strerror(errno)));
  }
  Status s = WriteAll(fd, text);
  if (s.ok() && fsync(fd) != 0) s = Status::IoError(std::strerror(errno));
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) s = Status::IoError(std::strerror(errno));
  if (!s.ok()) RemoveIfStill(fd, tmp);
  close(fd);
  if (!s.ok()) {
    return Status::IoError(fmt::format("cannot write calibration {}: {}", path, s.message()));
  }
  return Status::Ok();
}

}  // namespace tierflow
