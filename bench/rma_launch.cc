// SPDX-License-Identifier: Apache-2.0
#include "bench/rma_launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "bench/python.h"

namespace tierflow::bench {

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::vector<std::string> ProgramDirectories() {
  const std::string dir = ExecutableDirectory();
  std::vector<std::string> out{dir};
  for (const std::string& d : {dir + "/../" TIERFLOW_INSTALL_LIBDIR,
                               dir + "/../" TIERFLOW_INSTALL_LIBEXECDIR "/tierflow"}) {
    if (access(d.c_str(), X_OK) == 0) out.push_back(d);
  }
  return out;
}

namespace {

std::string FirstExisting(const std::vector<std::string>& paths, int mode) {
  for (const std::string& p : paths) {
    if (access(p.c_str(), mode) == 0) return p;
  }
  return "";
}

}  // namespace

// "openmpi=/usr/bin/mpirun.openmpi,mpich=/usr/bin/mpiexec.mpich", from the build.
std::vector<Mpi> BuiltMpis() {
  std::vector<Mpi> out;
  const std::string all = TIERFLOW_RMA_LAUNCHERS;
  for (std::size_t b = 0; b < all.size();) {
    std::size_t e = all.find(',', b);
    if (e == std::string::npos) e = all.size();
    const std::string item = all.substr(b, e - b);
    const std::size_t eq = item.find('=');
    if (eq != std::string::npos) out.push_back({item.substr(0, eq), item.substr(eq + 1)});
    b = e + 1;
  }
  return out;
}

Result<std::pair<std::string, std::string>> RmaFiles(const std::string& program,
                                                     const std::string& mpi) {
  const std::string dir = ExecutableDirectory();
  const std::string lib = "libtierflow_rma_" + mpi + ".so";
  const std::string p = FirstExisting(
      {dir + "/" + program, dir + "/../" TIERFLOW_INSTALL_LIBEXECDIR "/tierflow/" + program}, X_OK);
  const std::string l =
      FirstExisting({dir + "/" + lib, dir + "/../" TIERFLOW_INSTALL_LIBDIR "/" + lib}, R_OK);
  if (p.empty() || l.empty()) {
    return Status::NotFound(fmt::format("{} is missing beside {}: rebuild or reinstall",
                                        p.empty() ? program : lib, dir));
  }
  return std::pair{p, l};
}

std::string LaunchCommand(const Mpi& m, const std::string& program, const std::string& library,
                          const LaunchSpec& spec) {
  std::string c = Quote(m.launcher);
  if (spec.hosts != nullptr) {
    Result<std::string> args =
        spec.hosts->MpirunArgs(m.name, spec.ranks / std::max(spec.hosts->count(), 1));
    c = spec.hosts->Prefix() + " " + c + " " + (args.ok() ? *args : "");
    if (m.name == "openmpi") c += " --mca osc ucx";
  }
  if (m.name == "openmpi") {
    c += " --oversubscribe";
    if (geteuid() == 0) c += " --allow-run-as-root";
    c += fmt::format(" -np {}", spec.ranks);
    if (spec.with_library) c += " -x LD_PRELOAD=" + Quote(library);
    for (const auto& [k, v] : spec.env) c += " -x " + k + "=" + Quote(v);
  } else {
    c += fmt::format(" -n {}", spec.ranks);
    // Each rank on a core of its own, as Open MPI binds by default up to one rank per core:
    // unbound, MPICH's ranks migrate and a 1 MiB copy took 36 µs instead of 28 (without the
    // library 105 µs instead of 57). Oversubscribed runs stay unbound, as Open MPI's do.
    if (spec.ranks <= sysconf(_SC_NPROCESSORS_ONLN) && spec.hosts == nullptr) c += " -bind-to core";
    if (spec.with_library) c += " -genv LD_PRELOAD " + Quote(library);
    for (const auto& [k, v] : spec.env) c += " -genv " + k + " " + Quote(v);
  }
  return c + " " + Quote(program) + " " + spec.args + " 2>&1";
}

namespace {

// What `command` printed (stdout and stderr), and whether it exited with 0.
std::pair<std::string, bool> Output(const std::string& command) {
  std::string out;
  FILE* f = popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return {"cannot start " + command, false};
  char line[4096];
  while (std::fgets(line, sizeof line, f) != nullptr) out += line;
  return {out, pclose(f) == 0};
}

}  // namespace

Result<std::unique_ptr<Hosts>> Hosts::Up(int count, const std::vector<std::string>& shares) {
  Result<std::string> script = HelperScript("hosts.sh");
  if (!script.ok()) return script.status();
  // Owned by this process: the test bed goes down with it, however it ends.
  std::string command = fmt::format("bash {} up {} --owner {}", Quote(*script), count, getpid());
  for (const std::string& d : shares) command += " --share " + Quote(d);
  const auto [out, ok] = Output(command);
  const std::size_t at = out.find("TIERFLOW_HOSTS=");
  if (!ok || at == std::string::npos) {
    return Status(StatusCode::kFailed, "the test bed of hosts did not start: " + out);
  }
  const std::size_t from = at + std::string("TIERFLOW_HOSTS=").size();
  const std::string state = out.substr(from, out.find(';', from) - from);
  setenv("TIERFLOW_HOSTS", state.c_str(), 1);  // for `hosts.sh run` in the launch commands
  return std::unique_ptr<Hosts>(new Hosts(*script, state, count));
}

Hosts::~Hosts() {
  Output(fmt::format("TIERFLOW_HOSTS={} bash {} down", Quote(state_), Quote(script_)));
}

std::string Hosts::Prefix() const { return fmt::format("bash {} run host0", Quote(script_)); }

Result<std::string> Hosts::MpirunArgs(const std::string& mpi, int per_host) const {
  auto [out, ok] =
      Output(fmt::format("bash {} mpirun-args {} {}", Quote(script_), Quote(mpi), per_host));
  if (!ok) return Status(StatusCode::kFailed, out);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

// One line of a launch's output: a JSON row joins `rows`; true for the marker
// {"complete":true}, which does not, and for the `complete_after`-th row (0: none).
bool TakeLine(const std::string& line, std::vector<nlohmann::json>& rows,
              std::size_t complete_after = 0) {
  if (line.empty() || line[0] != '{') return false;
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) return false;
  if (j.contains("complete")) return true;
  rows.push_back(std::move(j));
  return complete_after > 0 && rows.size() >= complete_after;
}

}  // namespace

Result<std::vector<nlohmann::json>> LaunchJson(const std::string& command, int tolerated) {
  FILE* f = popen(command.c_str(), "r");
  if (f == nullptr) return Status::IoError("cannot start " + command);
  std::vector<nlohmann::json> rows;
  std::string output;
  char line[16384];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    output += line;
    TakeLine(line, rows);
  }
  const int rc = pclose(f);
  const bool tolerable = WIFEXITED(rc) && WEXITSTATUS(rc) == tolerated;
  if ((rc != 0 && !tolerable) || rows.empty()) {
    return Status::IoError(fmt::format("{} failed (status {}):\n{}", command, rc, output));
  }
  return rows;
}

}  // namespace tierflow::bench

namespace tierflow::bench {

namespace {

// /bin/sh -c `command` in a process group of its own, its stdout (and stderr) into a pipe.
pid_t Spawn(const std::string& command, int& out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], STDOUT_FILENO);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  out = fds[0];
  if (pid < 0) close(fds[0]);
  return pid;
}

}  // namespace

Result<std::vector<nlohmann::json>> LaunchJsonGrace(const std::string& command, int grace_s,
                                                    std::size_t complete_after) {
  int fd = -1;
  const pid_t pid = Spawn(command, fd);
  if (pid < 0) return Status::IoError("cannot start " + command);
  std::vector<nlohmann::json> rows;
  std::string output, pending;
  bool complete = false, ended = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  for (;;) {
    const auto left = deadline - std::chrono::steady_clock::now();
    const int wait_ms =
        complete ? static_cast<int>(std::max<long>(
                       0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count()))
                 : -1;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, wait_ms) == 0) {  // the grace period is over: the job hangs in finalize
      kill(-pid, SIGKILL);
      ended = true;
      break;
    }
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<std::size_t>(n));
    pending.append(buf, static_cast<std::size_t>(n));
    for (std::size_t eol; (eol = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, eol);
      pending.erase(0, eol + 1);
      if (TakeLine(line, rows, complete_after)) {
        complete = true;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
      }
    }
  }
  close(fd);
  int rc = 0;
  waitpid(pid, &rc, 0);
  if (ended) {
    std::fprintf(stderr,
                 "tierflow bench: the job printed all its rows and then did not end within "
                 "%d s (the MPI hung in MPI_Finalize: docs/hosts.md); ended it, rows kept\n",
                 grace_s);
  } else if (rc != 0 || rows.empty() || !complete) {
    return Status::IoError(fmt::format("{} failed (status {}):\n{}", command, rc, output));
  }
  return rows;
}

}  // namespace tierflow::bench
