// SPDX-License-Identifier: Apache-2.0
#include "sort/temp_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>

#include <fmt/format.h>

namespace tierflow::extsort {

namespace {

constexpr int kSlots = 8;
constexpr std::size_t kPath = 4096;
char g_paths[kSlots][kPath];
std::atomic<bool> g_used[kSlots];
char g_dir[kPath];
std::atomic<bool> g_dir_used{false};
std::mutex g_mu;
std::once_flag g_handlers;

struct Dirent64 {
  ino64_t ino;
  off64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

// Removes the files of `path` and then the directory, with async-signal-safe calls only (the
// signal handler's). A few passes: entries removed during a scan may hide others from it.
void RemoveFlatDirectory(const char* path) {
  const int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (int pass = 0; pass < 8; ++pass) {
    bool removed = false;
    lseek(fd, 0, SEEK_SET);
    for (long n; (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0;) {
      for (long at = 0; at < n;) {
        const auto* d = reinterpret_cast<const Dirent64*>(buf + at);
        at += d->reclen;
        if (std::strcmp(d->name, ".") == 0 || std::strcmp(d->name, "..") == 0) continue;
        removed = unlinkat(fd, d->name, 0) == 0 || removed;
      }
    }
    if (!removed) break;
  }
  close(fd);
  rmdir(path);
}

void OnSignal(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load()) unlink(g_paths[i]);
  }
  if (g_dir_used.load()) RemoveFlatDirectory(g_dir);
  signal(sig, SIG_DFL);
  raise(sig);
}

void InstallHandlers() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // nohup
    sigaction(sig, &sa, nullptr);
  }
}

// Only a tracked file is removed: a name this run never created may be another's file.
void Drop(const std::string& path, bool remove) {
  std::lock_guard lock(g_mu);
  bool tracked = false;
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load() && path == g_paths[i]) {
      g_used[i].store(false);
      tracked = true;
    }
  }
  if (remove && tracked) unlink(path.c_str());
}

}  // namespace

void TrackTempFile(const std::string& path) {
  std::call_once(g_handlers, InstallHandlers);
  std::lock_guard lock(g_mu);
  for (int i = 0; i < kSlots; ++i) {
    if (!g_used[i].load() && path.size() < kPath) {
      std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
      g_used[i].store(true);
      return;
    }
  }
}

void RemoveTempFile(const std::string& path) { Drop(path, true); }
void ForgetTempFile(const std::string& path) { Drop(path, false); }

void TrackTempDirectory(const std::string& path) {
  std::call_once(g_handlers, InstallHandlers);
  std::lock_guard lock(g_mu);
  if (path.size() >= kPath) return;
  std::memcpy(g_dir, path.c_str(), path.size() + 1);
  g_dir_used.store(true);
}

void ForgetTempDirectory() { g_dir_used.store(false); }

std::string TempName(const std::string& path, const std::string& tag) {
  return path + ".tierflow-" + tag + "-" + std::to_string(getpid());
}

// --- Ownership markers -------------------------------------------------------------------

namespace {

constexpr const char* kMarkerPrefix = ".tierflow-sort-";
constexpr const char* kMarkerSuffix = ".owner";
constexpr const char* kWorkDirPrefix = "tierflow-sort-";

std::string FirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The start time of process `pid` (clock ticks after boot, /proc/PID/stat field 22); empty
// when it does not exist or has exited (a zombie, field 3 "Z": it holds no file and writes
// nothing more, though no parent has reaped it yet).
std::string StartTime(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  std::getline(in, stat);
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && field == "Z") return "";
    if (i == 22) return field;
  }
  return "";
}

// Who a run is: the fields a marker records, in its order.
struct Owner {
  std::string host, boot, pidns, pid, start;
};

Owner Self() {
  Owner o;
  o.host = FirstLine("/etc/machine-id");
  if (o.host.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    o.host = name;
  }
  o.boot = FirstLine("/proc/sys/kernel/random/boot_id");
  char ns[128] = {};
  if (readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1) < 0) ns[0] = '\0';
  o.pidns = ns;
  o.pid = std::to_string(getpid());
  o.start = StartTime("self");
  return o;
}

// Whether the run `o` has ended, as far as this process can prove: on this host, in the same
// boot and PID namespace, its PID is gone or now another process's (another start time); or a
// boot of this host that has ended. Anything else may still be running.
bool ProvenDead(const Owner& o, const Owner& me) {
  if (o.host.empty() || o.host != me.host) return false;
  if (!o.boot.empty() && o.boot != me.boot) return true;
  if (o.pidns.empty() || o.pidns != me.pidns || o.pid.empty()) return false;
  const std::string start = StartTime(o.pid);
  return start.empty() || start != o.start;
}

std::string Serialize(const Owner& o, const std::vector<std::string>& names) {
  std::string s =
      fmt::format("tierflow sort owner 1\nhost {}\nboot {}\npidns {}\npid {}\nstart {}\n", o.host,
                  o.boot, o.pidns, o.pid, o.start);
  if (names.empty()) s += "directory\n";
  for (const std::string& n : names) s += "file " + n + "\n";
  return s;
}

// A marker's owner and claimed names; false when it is not one of ours (a symbolic link,
// another user's, not a marker, too large).
bool ReadMarker(int dir_fd, const std::string& name, Owner& o, std::vector<std::string>& files,
                bool& whole) {
  const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  std::string text(65536, '\0');
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_size < 65536) {
    n = read(fd, text.data(), text.size());
  }
  close(fd);
  if (n <= 0) return false;
  text.resize(static_cast<std::size_t>(n));
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != "tierflow sort owner 1") return false;
  whole = false;
  while (std::getline(in, line)) {
    const std::size_t space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "host") o.host = value;
    if (key == "boot") o.boot = value;
    if (key == "pidns") o.pidns = value;
    if (key == "pid") o.pid = value;
    if (key == "start") o.start = value;
    if (key == "directory") whole = true;
    if (key == "file" && !value.empty() && value.find('/') == std::string::npos && value != "." &&
        value != "..") {
      files.push_back(value);
    }
  }
  return true;
}

// Removes `name` in the directory if it is a regular file of this user.
bool RemoveOwnFile(int dir_fd, const std::string& name) {
  struct stat st {};
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) return false;
  return unlinkat(dir_fd, name.c_str(), 0) == 0;
}

bool IsMarkerName(const std::string& name) {
  return name.starts_with(kMarkerPrefix) && name.ends_with(kMarkerSuffix);
}

}  // namespace

Result<Claim> Claim::Make(const std::string& dir, const std::vector<std::string>& names) {
  unsigned char random[8];
  if (getrandom(random, sizeof(random), 0) != sizeof(random)) {
    return Status::IoError(fmt::format("getrandom failed: {}", std::strerror(errno)));
  }
  std::string tag;
  for (unsigned char b : random) tag += fmt::format("{:02x}", b);
  Claim c;
  c.marker_ = fmt::format("{}/{}{}-{}{}", dir, kMarkerPrefix, getpid(), tag, kMarkerSuffix);
  c.fd_ = open(c.marker_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (c.fd_ < 0) {
    return Status::IoError(fmt::format("cannot create {}: {} (is {} writable?)", c.marker_,
                                       std::strerror(errno), dir));
  }
  const std::string text = Serialize(Self(), names);
  if (write(c.fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      fsync(c.fd_) != 0) {
    return Status::IoError(fmt::format("cannot write {}: {}", c.marker_, std::strerror(errno)));
  }
  return c;
}

Claim::Claim(Claim&& o) noexcept
    : marker_(std::exchange(o.marker_, {})), fd_(std::exchange(o.fd_, -1)) {}

Claim& Claim::operator=(Claim&& o) noexcept {
  if (this != &o) {
    Release();
    marker_ = std::exchange(o.marker_, {});
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

Claim::~Claim() { Release(); }

void Claim::Release() {
  if (fd_ < 0) return;
  // The marker is removed only while its name is still the file this claim created.
  struct stat mine {
  }, named{};
  if (fstat(fd_, &mine) == 0 && lstat(marker_.c_str(), &named) == 0 &&
      mine.st_dev == named.st_dev && mine.st_ino == named.st_ino) {
    unlink(marker_.c_str());
  }
  close(fd_);
  fd_ = -1;
}

std::vector<std::string> RemoveStale(const std::string& dir) {
  std::vector<std::string> removed;
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return removed;
  const Owner me = Self();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    Owner o;
    std::vector<std::string> files;
    bool whole = false;
    if (!IsMarkerName(name) || !ReadMarker(dir_fd, name, o, files, whole) || whole ||
        !ProvenDead(o, me)) {
      continue;
    }
    for (const std::string& f : files) {
      if (RemoveOwnFile(dir_fd, f)) {
        removed.push_back(
            fmt::format("{}/{} (left by sort process {}, which has ended)", dir, f, o.pid));
      }
    }
    RemoveOwnFile(dir_fd, name);
  }
  close(dir_fd);
  return removed;
}

std::vector<std::string> RemoveStaleWorkDirectories(const std::string& parent) {
  std::vector<std::string> removed;
  const Owner me = Self();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    struct stat st {};
    if (!name.starts_with(kWorkDirPrefix) || lstat(e.path().c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
      continue;
    }
    const int dir_fd = open(e.path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0) continue;
    bool dead = false;
    for (const auto& m : std::filesystem::directory_iterator(e.path(), ec)) {
      Owner o;
      std::vector<std::string> files;
      bool whole = false;
      const std::string marker = m.path().filename().string();
      if (IsMarkerName(marker) && ReadMarker(dir_fd, marker, o, files, whole) && whole) {
        dead = ProvenDead(o, me);
        if (dead) {
          removed.push_back(fmt::format("{} (work directory of sort process {}, which has ended)",
                                        e.path().string(), o.pid));
        }
        break;
      }
    }
    close(dir_fd);
    // remove_all removes links themselves, never what they point to.
    if (dead) std::filesystem::remove_all(e.path(), ec);
  }
  return removed;
}

}  // namespace tierflow::extsort
