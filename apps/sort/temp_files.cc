#include "sort/temp_files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

namespace tierflow::extsort {

namespace {

constexpr int kSlots = 8;
constexpr std::size_t kPath = 4096;
char g_paths[kSlots][kPath];
std::atomic<bool> g_used[kSlots];
std::mutex g_mu;
std::once_flag g_handlers;

void OnSignal(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load()) unlink(g_paths[i]);
  }
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

namespace {
void Drop(const std::string& path, bool remove) {
  std::lock_guard lock(g_mu);
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load() && path == g_paths[i]) g_used[i].store(false);
  }
  if (remove) unlink(path.c_str());
}
}  // namespace

void RemoveTempFile(const std::string& path) { Drop(path, true); }
void ForgetTempFile(const std::string& path) { Drop(path, false); }

std::string TempName(const std::string& path, const std::string& tag) {
  return path + ".tierflow-" + tag + "-" + std::to_string(getpid());
}

std::string RemoveStale(const std::string& dir) {
  std::string removed;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::size_t at = name.find(".tierflow-");
    const std::size_t dash = name.rfind('-');
    if (at == std::string::npos || dash == std::string::npos || dash + 1 >= name.size()) continue;
    const std::string tag = name.substr(at + 10, dash - at - 10);
    if (tag != "runs" && tag != "partial") continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + dash + 1, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours
    if (std::filesystem::remove(e.path(), ec)) removed += (removed.empty() ? "" : ", ") + name;
  }
  return removed;
}

}  // namespace tierflow::extsort
