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

}  // namespace tierflow
