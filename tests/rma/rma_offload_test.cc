// SPDX-License-Identifier: Apache-2.0
// Large puts and gets offloaded to an engine (src/rma/mpi/offload.h), run with
// TIERFLOW_RMA_OFFLOAD set and a threshold low enough that most transfers go to the engine. In
// every kind of epoch (fence, GATS, lock, lock_all with flushes) each rank puts blocks of
// 4 KiB .. 512 KiB at odd offsets, a few bytes apart (blocks share cache lines), into its right
// neighbour's window, overwrites its origin buffer as soon as the completing call returns, and
// checks what its left neighbour put into its own window after a barrier; then gets the blocks
// back from the right neighbour and compares them. With TIERFLOW_OFFLOAD_TEST_FAULT=1, a put
// from memory that is not readable must come back as an error of the completing call, not a
// crash. Prints "PASS: 0 failures".
#include <mpi.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "mpi_check.h"

namespace {

int g_rank = 0, g_size = 1, g_failures = 0;

constexpr std::size_t kWindow = (std::size_t{3} << 20) + 1000;

struct Block {
  std::size_t offset, bytes;
};

// The blocks rank `origin` puts in round `round`: the same on the origin and the target.
std::vector<Block> Layout(int origin, int round) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(origin) * 1000 +
                      static_cast<std::uint64_t>(round));
  std::vector<Block> blocks;
  std::size_t at = rng() % 61;
  for (;;) {
    const std::size_t bytes = (std::size_t{4096} << (rng() % 8)) + rng() % 777;
    if (at + bytes > kWindow) break;
    blocks.push_back({at, bytes});
    at += bytes + rng() % 3 * 24;  // 0, 24 or 48 bytes apart: neighbours share lines
  }
  return blocks;
}

unsigned char Byte(int origin, int round, std::size_t i) {
  return static_cast<unsigned char>(
      (i * 131 + static_cast<std::size_t>(origin) * 17 + static_cast<std::size_t>(round) * 7) >> 3);
}

int Left() { return (g_rank + g_size - 1) % g_size; }
int Right() { return (g_rank + 1) % g_size; }

enum class Epoch { kFence, kGats, kLock, kLockAll };
const char* Name(Epoch e) {
  switch (e) {
    case Epoch::kFence:
      return "fence";
    case Epoch::kGats:
      return "gats";
    case Epoch::kLock:
      return "lock";
    case Epoch::kLockAll:
      return "lock_all";
  }
  return "?";
}

MPI_Group Neighbours() {
  MPI_Group world, g;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int both[2] = {Left(), Right()};
  MPI_Group_incl(world, Left() == Right() ? 1 : 2, both, &g);
  MPI_Group_free(&world);
  return g;
}

// Opens the access epoch to Right() (and, for GATS, the exposure epoch to Left()).
void Open(Epoch e, MPI_Win win, MPI_Group g) {
  if (e == Epoch::kFence) MPI_Win_fence(0, win);
  if (e == Epoch::kGats) {
    MPI_Win_post(g, 0, win);
    MPI_Win_start(g, 0, win);
  }
  if (e == Epoch::kLock) MPI_Win_lock(MPI_LOCK_EXCLUSIVE, Right(), 0, win);
  if (e == Epoch::kLockAll) MPI_Win_lock_all(0, win);
}

// Ends it; what was put is then at the target (after the barrier for the passive epochs).
void Close(Epoch e, MPI_Win win) {
  if (e == Epoch::kFence) MPI_Win_fence(0, win);
  if (e == Epoch::kGats) {
    MPI_Win_complete(win);
    MPI_Win_wait(win);
  }
  if (e == Epoch::kLock) MPI_Win_unlock(Right(), win);
  if (e == Epoch::kLockAll) {
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
  }
}

void Fill(std::vector<unsigned char>& buf, const std::vector<Block>& blocks, int origin,
          int round) {
  for (const Block& b : blocks) {
    for (std::size_t i = 0; i < b.bytes; ++i) buf[b.offset + i] = Byte(origin, round, b.offset + i);
  }
}

void PutRound(Epoch e, int round, MPI_Win win, unsigned char* base, MPI_Group g) {
  const std::vector<Block> mine = Layout(g_rank, round);
  std::vector<unsigned char> src(kWindow);
  Fill(src, mine, g_rank, round);
  Open(e, win, g);
  for (const Block& b : mine) {
    MPI_Put(src.data() + b.offset, static_cast<int>(b.bytes), MPI_BYTE, Right(),
            static_cast<MPI_Aint>(b.offset), static_cast<int>(b.bytes), MPI_BYTE, win);
  }
  Close(e, win);
  std::memset(src.data(), 0xee, src.size());  // the origin buffer is the program's again
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_lock(MPI_LOCK_SHARED, g_rank, 0, win);  // the public copy, in the separate model
  for (const Block& b : Layout(Left(), round)) {
    for (std::size_t i = 0; i < b.bytes; ++i) {
      if (base[b.offset + i] != Byte(Left(), round, b.offset + i)) {
        CHECK(false, "%s round %d: byte %zu of the block at %zu (%zu bytes) from rank %d", Name(e),
              round, i, b.offset, b.bytes, Left());
        break;
      }
    }
  }
  MPI_Win_unlock(g_rank, win);
  MPI_Barrier(MPI_COMM_WORLD);
}

void GetRound(Epoch e, int round, MPI_Win win, MPI_Group g) {
  const std::vector<Block> mine = Layout(g_rank, round);
  std::vector<unsigned char> dst(kWindow, 0);
  Open(e, win, g);
  for (const Block& b : mine) {
    MPI_Get(dst.data() + b.offset, static_cast<int>(b.bytes), MPI_BYTE, Right(),
            static_cast<MPI_Aint>(b.offset), static_cast<int>(b.bytes), MPI_BYTE, win);
  }
  Close(e, win);
  for (const Block& b : mine) {
    for (std::size_t i = 0; i < b.bytes; ++i) {
      if (dst[b.offset + i] != Byte(g_rank, round, b.offset + i)) {
        CHECK(false, "%s round %d: get of the block at %zu (%zu bytes), byte %zu", Name(e), round,
              b.offset, b.bytes, i);
        break;
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A put from memory nobody may read: the engine's fault is the completing call's error.
void FaultingPut(MPI_Win win) {
  const std::size_t n = std::size_t{1} << 20;
  void* bad = mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  MPI_Win_lock(MPI_LOCK_EXCLUSIVE, Right(), 0, win);
  int rc =
      MPI_Put(bad, static_cast<int>(n), MPI_BYTE, Right(), 0, static_cast<int>(n), MPI_BYTE, win);
  CHECK(rc == MPI_SUCCESS, "the offloaded put itself returned %d", rc);
  rc = MPI_Win_unlock(Right(), win);
  int cls = MPI_SUCCESS;
  MPI_Error_class(rc, &cls);  // the reason is on stderr (the test's regular expression)
  CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER,
        "MPI_Win_unlock after a put from unreadable memory: %d (class %d)", rc, cls);
  // The lock was released all the same: the window can be locked again.
  rc = MPI_Win_lock(MPI_LOCK_EXCLUSIVE, Right(), 0, win);
  CHECK(rc == MPI_SUCCESS, "MPI_Win_lock after the failed unlock: %d", rc);
  MPI_Win_unlock(Right(), win);
  munmap(bad, n);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  unsigned char* base = nullptr;
  MPI_Win win;
  MPI_Win_allocate(static_cast<MPI_Aint>(kWindow), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  MPI_Group g = Neighbours();
  int round = 0;
  for (Epoch e : {Epoch::kFence, Epoch::kGats, Epoch::kLock, Epoch::kLockAll}) {
    for (int i = 0; i < 2; ++i, ++round) {
      PutRound(e, round, win, base, g);
      GetRound(e, round, win, g);
    }
  }
  const char* fault = std::getenv("TIERFLOW_OFFLOAD_TEST_FAULT");
  if (fault != nullptr && std::strcmp(fault, "1") == 0) FaultingPut(win);
  MPI_Group_free(&g);
  MPI_Win_free(&win);
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("%s: %d failures\n", failures == 0 ? "PASS" : "FAIL", failures);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
