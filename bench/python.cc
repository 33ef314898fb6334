// SPDX-License-Identifier: Apache-2.0
#include "bench/python.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "common/own_file.h"

extern char** environ;

namespace tierflow::bench {

namespace {

Result<std::string> FindScript(const std::string& script) {
  const std::string dir = ExecutableDirectory();
  for (const std::string& place : {dir + "/share/tierflow", dir + "/../share/tierflow"}) {
    if (access((place + "/" + script).c_str(), R_OK) == 0) return place + "/" + script;
  }
  return Status::NotFound(
      fmt::format("the helper script {} is neither in {}/share/tierflow (build tree) nor in "
                  "{}/../share/tierflow (installed): rebuild, or reinstall tierflow",
                  script, dir, dir));
}

// $TIERFLOW_PYTHON; the project's venv beside the build tree; the venv of the source tree this
// binary was built from (a build directory elsewhere, or an install), while it exists; else
// python3 from PATH.
std::string FindPython() {
  if (const char* env = std::getenv("TIERFLOW_PYTHON"); env != nullptr && *env != '\0') return env;
  const std::string venv = ExecutableDirectory() + "/../.venv/bin/python3";
  if (access(venv.c_str(), X_OK) == 0) return venv;
#ifdef TIERFLOW_SOURCE_VENV_PYTHON
  if (access(TIERFLOW_SOURCE_VENV_PYTHON, X_OK) == 0) return TIERFLOW_SOURCE_VENV_PYTHON;
#endif
  return "python3";
}

}  // namespace

Result<std::string> RunPythonScript(const std::string& script, const std::vector<std::string>& args,
                                    std::string_view needs) {
  Result<std::string> found = FindScript(script);
  if (!found.ok()) return found.status();
  const std::string& script_path = *found;
  const std::string python = FindPython();
  std::vector<const char*> argv = {python.c_str(), script_path.c_str()};
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return Status::IoError(fmt::format("pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  pid_t pid;
  const int rc = posix_spawnp(&pid, python.c_str(), &actions, nullptr,
                              const_cast<char* const*>(argv.data()), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string text;
  if (rc == 0) {
    char buf[4096];
    for (;;) {
      ssize_t n = read(out[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
  }
  close(out[0]);
  if (rc != 0) {
    return Status::NotFound(fmt::format(
        "cannot start {} ({}): this needs Python with {}; run 'make setup' in the source tree, "
        "or set TIERFLOW_PYTHON to an interpreter that has it",
        python, std::strerror(rc), needs));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status(StatusCode::kFailed,
                  fmt::format("{} failed (see its message above)", script_path));
  }
  return text;
}

Status CheckPythonModules(std::string_view modules) {
  const std::string python = FindPython();
  const std::string code = "import " + std::string(modules);
  const char* argv[] = {python.c_str(), "-c", code.c_str(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  const int rc = posix_spawnp(&pid, python.c_str(), &actions, nullptr,
                              const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (rc == 0) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::NotFound(fmt::format(
        "{} cannot import {}: run 'make setup' in the source tree, or set TIERFLOW_PYTHON to an "
        "interpreter that has {}",
        python, modules, modules));
  }
  return Status::Ok();
}

namespace {

Status WriteAll(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::IoError(std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> HelperScript(const std::string& script) { return FindScript(script); }

Status Plot(const std::string& script, const nlohmann::json& results, const std::string& png_path) {
  const char* tmp = std::getenv("TMPDIR");
  std::string name =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/tierflow-plot-XXXXXX.json";
  const int fd = mkostemps(name.data(), 5, O_CLOEXEC);
  if (fd < 0)
    return Status::IoError(fmt::format("cannot create a temporary file: {}", std::strerror(errno)));
  // Written through the descriptor mkostemps made: the name is never opened again.
  Status written = WriteAll(fd, results.dump());
  Result<std::string> r = written.ok() ? RunPythonScript(script, {name, png_path}, "matplotlib")
                                       : Result<std::string>(written);
  RemoveIfStill(fd, name);
  close(fd);
  if (!r.ok()) {
    return Status(r.status().code(),
                  fmt::format("plotting {}: {}", png_path, r.status().message()));
  }
  return Status::Ok();
}

}  // namespace tierflow::bench
