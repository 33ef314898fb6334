#include "bench/plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

extern char** environ;

namespace tierflow::bench {

Status Plot(const std::string& script, const nlohmann::json& results, const std::string& png_path) {
  std::string python = TIERFLOW_SOURCE_DIR "/.venv/bin/python3";
  if (const char* env = std::getenv("TIERFLOW_PYTHON"); env != nullptr && *env != '\0') python = env;
  if (access(python.c_str(), X_OK) != 0) {
    return Status::NotFound(fmt::format(
        "plotting needs Python with matplotlib at {}: run 'make setup' (or set TIERFLOW_PYTHON)", python));
  }
  const std::string script_path = std::string(TIERFLOW_SOURCE_DIR "/bench/") + script;
  char tmpl[] = "/tmp/tierflow-plot-XXXXXX.json";
  int fd = mkstemps(tmpl, 5);
  if (fd < 0) return Status::IoError(fmt::format("cannot create a temporary file: {}", std::strerror(errno)));
  close(fd);
  {
    std::ofstream f(tmpl);
    f << results.dump();
  }
  const char* argv[] = {python.c_str(), script_path.c_str(), tmpl, png_path.c_str(), nullptr};
  pid_t pid;
  int rc = posix_spawn(&pid, python.c_str(), nullptr, nullptr, const_cast<char* const*>(argv), environ);
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  unlink(tmpl);
  if (rc != 0) return Status::IoError(fmt::format("cannot start {}: {}", python, std::strerror(rc)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status(StatusCode::kFailed, fmt::format("{} failed writing {} (see its message above)",
                                                   script_path, png_path));
  }
  return Status::Ok();
}

}  // namespace tierflow::bench
