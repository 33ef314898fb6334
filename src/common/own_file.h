// SPDX-License-Identifier: Apache-2.0
// Files this process created, handled through the descriptor it created them with.
#pragma once

#include <string>
#include <string_view>

#include "tierflow/status.h"

namespace tierflow {

// Writes all of `text` to `fd`, continuing short and interrupted writes. Errors: kIoError
// with the system's reason.
Status WriteAll(int fd, std::string_view text);
// Removes `path` only while it still names the file open as `fd`: in a directory others may
// write, the name may have been replaced since this process made the file.
void RemoveIfStill(int fd, const std::string& path);
// A new file in `dir` that no one else can name: an unnamed O_TMPFILE, or where the file
// system has none a mkstemp file unlinked at once. Either way nothing is left to remove, and
// a planted name or symbolic link is never opened. The descriptor (read-write) is the caller's
// to close. Errors name `dir`, the reason and `purpose` ("calibration cannot create ...").
Result<int> UnnamedFile(const std::string& dir, std::string_view purpose);

}  // namespace tierflow
