// Files a sort must not leave behind: removed on every exit path, signals included (SIGINT,
// SIGTERM, SIGHUP: the handler unlinks them and re-raises). SIGKILL cannot be caught: their
// names carry the owner's PID, and RemoveStale removes those of processes that are gone.
#pragma once

#include <string>

namespace tierflow::extsort {

// Registers `path` (at most 8 at once). Thread-safe.
void TrackTempFile(const std::string& path);
// Unlinks a tracked file and forgets it.
void RemoveTempFile(const std::string& path);
// Forgets it without removing (it became the output).
void ForgetTempFile(const std::string& path);
// The name of a temporary file beside `path`: path + "." + tag + "-" + pid.
std::string TempName(const std::string& path, const std::string& tag);
// Removes files named like TempName in `dir` whose process no longer exists; returns their
// names (empty: none).
std::string RemoveStale(const std::string& dir);

}  // namespace tierflow::extsort
