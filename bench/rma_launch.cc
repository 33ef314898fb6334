// SPDX-License-Identifier: Apache-2.0
#include "bench/rma_launch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "bench/bench_util.h"

namespace tierflow::bench {

namespace {

std::string Quote(const std::string& s) { return "'" + s + "'"; }

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
    if (spec.ranks <= sysconf(_SC_NPROCESSORS_ONLN)) c += " -bind-to core";
    if (spec.with_library) c += " -genv LD_PRELOAD " + Quote(library);
    for (const auto& [k, v] : spec.env) c += " -genv " + k + " " + Quote(v);
  }
  return c + " " + Quote(program) + " " + spec.args + " 2>&1";
}

Result<std::vector<nlohmann::json>> LaunchJson(const std::string& command, int tolerated) {
  FILE* f = popen(command.c_str(), "r");
  if (f == nullptr) return Status::IoError("cannot start " + command);
  std::vector<nlohmann::json> rows;
  std::string output;
  char line[16384];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    output += line;
    if (line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) rows.push_back(std::move(j));
  }
  const int rc = pclose(f);
  const bool tolerable = WIFEXITED(rc) && WEXITSTATUS(rc) == tolerated;
  if ((rc != 0 && !tolerable) || rows.empty()) {
    return Status::IoError(fmt::format("{} failed (status {}):\n{}", command, rc, output));
  }
  return rows;
}

}  // namespace tierflow::bench
