// SPDX-License-Identifier: Apache-2.0
#include "common/own_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace tierflow {

Status WriteAll(int fd, std::string_view text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::IoError(std::strerror(n < 0 ? errno : EIO));
    done += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

void RemoveIfStill(int fd, const std::string& path) {
  struct stat mine {};
  struct stat named {};
  if (fstat(fd, &mine) == 0 && lstat(path.c_str(), &named) == 0 && mine.st_dev == named.st_dev &&
      mine.st_ino == named.st_ino) {
    unlink(path.c_str());
  }
}

Result<int> UnnamedFile(const std::string& dir, std::string_view purpose) {
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string name = dir + "/tierflow-XXXXXX";
  fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) {
    RemoveIfStill(fd, name);
    return fd;
  }
  const int err = errno;
  const std::string what =
      std::string(purpose) + " cannot create a file in " + dir + ": " + std::strerror(err);
  if (err == ENOENT) return Status::NotFound(what + " (the directory does not exist)");
  if (err == ENOTDIR) return Status::InvalidArgument(what + " (give a directory)");
  return Status::IoError(what + " (choose a directory you may write)");
}

}  // namespace tierflow
