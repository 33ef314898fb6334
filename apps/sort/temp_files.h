// SPDX-License-Identifier: Apache-2.0
// Files a sort must not leave behind, and the proof that they are its own.
//
// Tracked files (and a tracked work directory) are removed on every exit path, signals
// included (SIGINT, SIGTERM, SIGHUP: the handler removes them and re-raises). SIGKILL cannot be
// caught: before it makes temporary files, a run claims them in a marker file created with
// O_EXCL beside them, naming the run (host, boot, PID namespace, PID and its start time) and
// the files. A later run removes only what the marker of a run proven dead claims — never a
// file that merely looks like a temporary one, nor one of a run on another host or in another
// PID namespace, which may still be alive.
#pragma once

#include <string>
#include <vector>

#include "tierflow/status.h"

namespace tierflow::extsort {

// Registers `path` (at most 8 at once). Thread-safe.
void TrackTempFile(const std::string& path);
// Unlinks a tracked file and forgets it; a path that is not tracked is left alone.
void RemoveTempFile(const std::string& path);
// Forgets it without removing (it became the output).
void ForgetTempFile(const std::string& path);
// Registers the work directory (one; its files, not subdirectories, are removed with it on a
// signal). Thread-safe.
void TrackTempDirectory(const std::string& path);
void ForgetTempDirectory();
// The name of a temporary file beside `path`: path + "." + tag + "-" + pid.
std::string TempName(const std::string& path, const std::string& tag);

// This run's claim on the files `names` (base names) in `dir`, or on `dir` as a whole when
// `names` is empty: a marker created with O_EXCL in `dir`. Released (the marker removed) when
// destroyed; a process killed with SIGKILL leaves it for RemoveStale. Move-only.
class Claim {
 public:
  // Errors: the marker cannot be created in `dir` (the message names it).
  static Result<Claim> Make(const std::string& dir, const std::vector<std::string>& names);
  Claim() = default;
  Claim(Claim&& o) noexcept;
  Claim& operator=(Claim&& o) noexcept;
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;
  ~Claim();

 private:
  void Release();
  std::string marker_;
  int fd_ = -1;
};

// Removes in `dir` what markers of dead runs claim (files of this user, never through a
// symbolic link) and the markers; returns one line per removal, naming the file and the run.
std::vector<std::string> RemoveStale(const std::string& dir);
// Removes work directories "tierflow-sort-*" in `parent` whose marker names a dead run;
// returns one line per directory removed.
std::vector<std::string> RemoveStaleWorkDirectories(const std::string& parent);

}  // namespace tierflow::extsort
