// SPDX-License-Identifier: Apache-2.0
// Checkpoint and restart on data pipes (the paper's checkpointing workload): DRAM regions are
// written to one file each through pipes running at once, each transfer ending with fdatasync
// (PipeOptions::sync_writes). The files go into a directory of their own, renamed to its final
// name only when all are durable, so a checkpoint is complete or absent whenever the writer
// dies. On start the program restores the latest checkpoint (read back through pipes and
// checked), then writes the next generation and removes the one before.
// Usage: checkpoint DIRECTORY [MIB [verify]] (MIB of regions, default 64; `verify`: restore and
// check only). Exit status 0 when everything restored was intact.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <tierflow/pipe_runtime.h>

using namespace tierflow;

namespace {

constexpr int kRegions = 4;

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "checkpoint: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

Status Errno(const std::string& what) {
  return Status::IoError(what + ": " + std::strerror(errno));
}

// Word k of region r in generation g: every byte of a checkpoint says where it belongs.
std::uint64_t Word(std::uint64_t g, int r, std::uint64_t k) {
  return (g << 48) ^ (static_cast<std::uint64_t>(r) << 40) ^ k;
}

std::string Region(const std::string& dir, int r) { return dir + "/region-" + std::to_string(r); }

// Removes a directory of this program's: its region files, then the directory.
void RemoveRegions(const std::string& path) {
  for (int r = 0; r < kRegions; ++r) unlink(Region(path, r).c_str());
  rmdir(path.c_str());
}

// This program's entries in `dir`: checkpoint-G (the highest G); partial-PID directories of
// writers that are gone and retired-G directories (older generations a killed writer was
// removing), which it removes.
std::uint64_t Scan(const std::string& dir) {
  std::uint64_t latest = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    unsigned long long n = 0;
    char tail = 0;
    if (std::sscanf(e->d_name, "checkpoint-%llu%c", &n, &tail) == 1) {
      latest = std::max<std::uint64_t>(latest, n);
    } else if ((std::sscanf(e->d_name, "partial-%llu%c", &n, &tail) == 1 &&
                kill(static_cast<pid_t>(n), 0) != 0 && errno == ESRCH) ||
               std::sscanf(e->d_name, "retired-%llu%c", &n, &tail) == 1) {
      RemoveRegions(dir + "/" + e->d_name);
    }
  }
  closedir(d);
  return latest;
}

// Removes the checkpoints older than generation g (a writer killed after its rename may have
// left the one before it). Each is renamed to retired-G first, so that a writer killed while
// deleting never leaves a partial directory under a checkpoint's name.
void RemoveOlder(const std::string& dir, std::uint64_t g) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<unsigned long long> old;
  while (dirent* e = readdir(d)) {
    unsigned long long n = 0;
    char tail = 0;
    if (std::sscanf(e->d_name, "checkpoint-%llu%c", &n, &tail) == 1 && n < g) old.push_back(n);
  }
  closedir(d);
  for (unsigned long long n : old) {
    const std::string retired = dir + "/retired-" + std::to_string(n);
    if (rename((dir + "/checkpoint-" + std::to_string(n)).c_str(), retired.c_str()) == 0) {
      RemoveRegions(retired);
    }
  }
}

// Moves every region between DRAM and the files of `dir` through one pipe each, all at once.
Status MoveAll(PipeRuntime& rt, const Locator& mem, const std::string& dir, bool write) {
  const std::uint64_t size = mem.capacity() / kRegions;
  PipeOptions o;
  o.sync_writes = write;
  std::vector<Pipe> pipes;
  std::vector<Handle> handles;
  for (int r = 0; r < kRegions; ++r) {
    Result<Locator> f =
        rt.File(Region(dir, r), 0, write ? size : 0, write ? FileMode::kCreate : FileMode::kRead);
    if (!f.ok()) return f.status();
    if (!write && f->capacity() != size) {
      return Status::Failed(Region(dir, r) + " has the wrong size: the checkpoint is damaged");
    }
    Result<Pipe> p = write ? rt.Connect(mem, *f, o) : rt.Connect(*f, mem, o);
    if (!p.ok()) return p.status();
    Result<Handle> h = write ? p->Submit(r * size, 0, size) : p->Submit(0, r * size, size);
    if (!h.ok()) return h.status();
    pipes.push_back(std::move(*p));
    handles.push_back(std::move(*h));
  }
  Status first;
  for (Handle& h : handles) {
    if (Status s = h.Wait(); first.ok()) first = s;
  }
  return first;
}

Status Restore(PipeRuntime& rt, const Locator& mem, const std::string& dir, std::uint64_t g) {
  if (Status s = MoveAll(rt, mem, dir, false); !s.ok()) return s;
  const auto* words = reinterpret_cast<const std::uint64_t*>(mem.data());
  const std::uint64_t per = mem.capacity() / kRegions / 8;
  for (int r = 0; r < kRegions; ++r) {
    for (std::uint64_t k = 0; k < per; ++k) {
      if (words[r * per + k] != Word(g, r, k)) {
        return Status::Failed(Region(dir, r) + " differs at word " + std::to_string(k) +
                              ": the checkpoint is damaged");
      }
    }
  }
  return Status::Ok();
}

Status SyncDirectory(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(path);
  const bool ok = fsync(fd) == 0;
  close(fd);
  return ok ? Status::Ok() : Errno("fsync " + path);
}

// Generation g into partial-PID, then renamed to checkpoint-g once every file and the
// directory are durable; the previous generation is removed after that.
Status Write(PipeRuntime& rt, const Locator& mem, const std::string& dir, std::uint64_t g) {
  auto* words = reinterpret_cast<std::uint64_t*>(mem.data());
  const std::uint64_t per = mem.capacity() / kRegions / 8;
  for (int r = 0; r < kRegions; ++r) {
    for (std::uint64_t k = 0; k < per; ++k) words[r * per + k] = Word(g, r, k);
  }
  const std::string partial = dir + "/partial-" + std::to_string(getpid());
  const std::string final = dir + "/checkpoint-" + std::to_string(g);
  if (mkdir(partial.c_str(), 0700) != 0) return Errno("mkdir " + partial);
  Status s = MoveAll(rt, mem, partial, true);
  if (s.ok()) s = SyncDirectory(partial);
  if (s.ok() && rename(partial.c_str(), final.c_str()) != 0) s = Errno("rename to " + final);
  if (s.ok()) s = SyncDirectory(dir);
  if (!s.ok()) return s;
  RemoveOlder(dir, g);
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: checkpoint DIRECTORY [MIB [verify]]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const long mib = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 64;
  if (mib < kRegions || mib > 65536 || mib % kRegions != 0) {
    std::fprintf(stderr, "checkpoint: MIB %s: give a multiple of %d from %d to 65536\n",
                 argc > 2 ? argv[2] : "", kRegions, kRegions);
    return 2;
  }
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create();
  if (!rt.ok()) return Fail("runtime", rt.status());
  Result<Locator> mem = (*rt)->Memory(TierKind::kDram, -1, static_cast<std::size_t>(mib) << 20);
  if (!mem.ok()) return Fail("regions", mem.status());
  const std::uint64_t latest = Scan(dir);
  if (latest > 0) {
    const std::string from = dir + "/checkpoint-" + std::to_string(latest);
    if (Status s = Restore(**rt, *mem, from, latest); !s.ok()) return Fail("restore", s);
    std::printf("restored generation %llu from %s: intact\n",
                static_cast<unsigned long long>(latest), from.c_str());
  }
  if (argc > 3 && std::strcmp(argv[3], "verify") == 0) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (Status s = Write(**rt, *mem, dir, latest + 1); !s.ok()) return Fail("write", s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote generation %llu: %ld MiB in %d files, durable, at %.2f GB/s\n",
              static_cast<unsigned long long>(latest + 1), mib, kRegions,
              static_cast<double>(mib << 20) / secs / 1e9);
  return 0;
}
