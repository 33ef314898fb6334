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

extern char** environ;

namespace tierflow::bench {

Result<std::string> RunPythonScript(const std::string& script, const std::vector<std::string>& args,
                                    std::string_view needs) {
  std::string python = TIERFLOW_SOURCE_DIR "/.venv/bin/python3";
  if (const char* env = std::getenv("TIERFLOW_PYTHON"); env != nullptr && *env != '\0')
    python = env;
  if (access(python.c_str(), X_OK) != 0) {
    return Status::NotFound(
        fmt::format("this needs Python with {} at {}: run 'make setup' (or set "
                    "TIERFLOW_PYTHON)",
                    needs, python));
  }
  const std::string script_path = std::string(TIERFLOW_SOURCE_DIR "/") + script;
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
  const int rc = posix_spawn(&pid, python.c_str(), &actions, nullptr,
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
  if (rc != 0)
    return Status::IoError(fmt::format("cannot start {}: {}", python, std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status(StatusCode::kFailed,
                  fmt::format("{} failed (see its message above)", script_path));
  }
  return text;
}

Status Plot(const std::string& script, const nlohmann::json& results, const std::string& png_path) {
  char tmpl[] = "/tmp/tierflow-plot-XXXXXX.json";
  int fd = mkstemps(tmpl, 5);
  if (fd < 0)
    return Status::IoError(fmt::format("cannot create a temporary file: {}", std::strerror(errno)));
  close(fd);
  {
    std::ofstream f(tmpl);
    f << results.dump();
  }
  Result<std::string> r = RunPythonScript("bench/" + script, {tmpl, png_path}, "matplotlib");
  unlink(tmpl);
  if (!r.ok()) {
    return Status(r.status().code(),
                  fmt::format("plotting {}: {}", png_path, r.status().message()));
  }
  return Status::Ok();
}

}  // namespace tierflow::bench
