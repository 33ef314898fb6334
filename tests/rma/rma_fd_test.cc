// SPDX-License-Identifier: Apache-2.0
// MPI_Alloc_mem memory is not open to other processes of the same user (security review,
// item 11): its memfd stays open for the windows to come, and the kernel lets any process
// that may ptrace-read this one open /proc/PID/fd/N, Yama or not. A forked process of the same
// uid tries every descriptor of the rank that names a tierflow-rma memfd, before, while and
// after a window over the memory lives; a window over it must still be shared between the
// ranks (TIERFLOW_RMA_VERBOSE=1 says so). Run as an unprivileged user (rma_as_user.sh): root
// opens any file whatever its mode.
#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

int g_rank = 0, g_failures = 0;

// Descriptors of process `pid` naming a tierflow-rma memfd that this process could open for
// reading: counted in a forked child, as another process of the user would.
int OpenableFromOutside(pid_t pid) {
  const pid_t kid = fork();
  if (kid == 0) {
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) _exit(100);
    int opened = 0;
    while (dirent* e = readdir(d)) {
      const std::string path = dir + "/" + e->d_name;
      char target[256] = {};
      if (readlink(path.c_str(), target, sizeof(target) - 1) <= 0) continue;
      if (std::strstr(target, "memfd:tierflow-rma") == nullptr) continue;
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        std::fprintf(stderr, "rank %d: another process opened %s (%s)\n", g_rank, path.c_str(),
                     target);
        ++opened;
        close(fd);
      }
    }
    closedir(d);
    _exit(opened);
  }
  int status = 0;
  waitpid(kid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

void Expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAIL: %s\n", g_rank, what);
    ++g_failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  if (geteuid() == 0) {
    std::printf(
        "rma_fd_test: run as root, who opens any file whatever its mode: run it as a "
        "user (tests/rma/rma_as_user.sh)\n");
  }
  int* small = nullptr;
  int* large = nullptr;
  MPI_Alloc_mem(256, MPI_INFO_NULL, &small);
  MPI_Alloc_mem(1 << 20, MPI_INFO_NULL, &large);
  large[0] = 0;
  Expect(OpenableFromOutside(getpid()) == 0, "MPI_Alloc_mem memory opened by another process");
  MPI_Win win;
  MPI_Win_create(large, 1 << 20, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  Expect(OpenableFromOutside(getpid()) == 0, "window memory opened by another process");
  MPI_Win_fence(0, win);
  const int value = 4242;
  if (g_rank == 0) MPI_Put(&value, 1, MPI_INT, 1, 7, 1, MPI_INT, win);
  MPI_Win_fence(0, win);
  if (g_rank == 1) Expect(large[7] == 4242, "the put did not arrive");
  MPI_Win_free(&win);
  Expect(OpenableFromOutside(getpid()) == 0, "MPI_Alloc_mem memory opened after the window");
  MPI_Free_mem(small);
  MPI_Free_mem(large);
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    std::printf("rma_fd_test: %s\n", failures == 0 ? "no memfd open to another process" : "FAIL");
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
