// SPDX-License-Identifier: Apache-2.0
#include "bench/direct_io.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace tierflow::bench {

namespace {

// Keeps `depth` requests in flight until `size` bytes are done.
Status Stream(io_uring& ring, int fd, const std::string& path, std::byte* buf, std::uint64_t size,
              unsigned depth, std::uint64_t chunk, bool write) {
  std::uint64_t next = 0, done = 0;
  unsigned in_flight = 0;
  while (done < size) {
    while (in_flight < depth && next < size) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      const auto n = static_cast<unsigned>(std::min(chunk, size - next));
      if (write) {
        io_uring_prep_write(sqe, fd, buf + next, n, next);
      } else {
        io_uring_prep_read(sqe, fd, buf + next, n, next);
      }
      next += n;
      ++in_flight;
    }
    io_uring_submit_and_wait(&ring, 1);
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(&ring, &cqe) == 0) {
      if (cqe->res <= 0) {
        return Status::IoError(fmt::format("{} {}: {}", write ? "write" : "read", path,
                                           std::strerror(cqe->res < 0 ? -cqe->res : EIO)));
      }
      done += static_cast<std::uint64_t>(cqe->res);  // whole chunks: O_DIRECT, aligned
      --in_flight;
      io_uring_cqe_seen(&ring, cqe);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<double> DirectIo(const std::string& path, std::byte* buf, std::uint64_t size, unsigned depth,
                        std::uint64_t chunk, bool write) {
  const int flags = write ? O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW : O_RDONLY;
  const int fd = open(path.c_str(), flags | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  io_uring ring{};
  if (int rc = io_uring_queue_init(depth, &ring, 0); rc < 0) {
    close(fd);
    return Status::Unsupported(fmt::format("io_uring: {}", std::strerror(-rc)));
  }
  const auto t0 = std::chrono::steady_clock::now();
  Status s = Stream(ring, fd, path, buf, size, depth, chunk, write);
  if (s.ok() && write && fdatasync(fd) != 0) {
    s = Status::IoError(fmt::format("fdatasync {}: {}", path, std::strerror(errno)));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  io_uring_queue_exit(&ring);
  close(fd);
  if (!s.ok()) return s;
  return secs;
}

}  // namespace tierflow::bench
