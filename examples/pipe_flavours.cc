// SPDX-License-Identifier: Apache-2.0
// Data pipes in their three flavours: a file read into DRAM with a blocking transfer, sorted
// runs written back with futures and callbacks, and read again through the pipe's readiness
// descriptor in an epoll loop; the plan explained first. Usage: pipe_flavours [DIRECTORY] (default
// /tmp; its files go in a new directory there, removed at the end however the run ends).
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include <tierflow/pipe_runtime.h>

using namespace tierflow;

namespace {

constexpr std::size_t kRun = 1 << 20;  // bytes per run
constexpr int kRuns = 8;

int Fail(const char* what, const Status& s) {
  std::fprintf(stderr, "pipe_flavours: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

// The first error among several results, or ok.
Status FirstError(std::initializer_list<Status> all) {
  for (const Status& s : all) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

// A directory of our own (mkdtemp: new, mode 0700) for the example's files, removed with them
// however main ends: nothing is left behind, and nothing not ours is touched.
class WorkDir {
 public:
  explicit WorkDir(const std::string& parent) {
    std::string t = parent + "/pipe-flavours-XXXXXX";
    if (mkdtemp(t.data()) != nullptr) path_ = t;
  }
  ~WorkDir() {
    if (path_.empty()) return;
    for (const char* name : {"in", "runs"}) unlink(File(name).c_str());
    rmdir(path_.c_str());
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string File(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes kRuns runs of u64 values, descending, to `path` with plain POSIX calls.
bool MakeInput(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wbx");  // x: O_EXCL
  if (f == nullptr) return false;
  for (std::uint64_t i = kRuns * kRun / 8; i-- > 0;) std::fwrite(&i, 8, 1, f);
  return std::fclose(f) == 0;
}

// (a) Blocking: the whole input into DRAM, then each run sorted there.
Status ReadAndSort(PipeRuntime& rt, const Locator& in, const Locator& mem) {
  Result<Pipe> up = rt.Connect(in, mem);
  if (!up.ok()) return up.status();
  std::printf("%s", up->Explain().ToText().c_str());
  if (Status s = up->Transfer(0, 0, kRuns * kRun); !s.ok()) return s;
  auto* v = reinterpret_cast<std::uint64_t*>(mem.data());
  for (int r = 0; r < kRuns; ++r) std::sort(v + r * kRun / 8, v + (r + 1) * kRun / 8);
  return Status::Ok();
}

// (b) Inversion of control: each run written with a future; a callback counts them.
Status WriteRuns(PipeRuntime& rt, const Locator& mem, const Locator& runs) {
  Result<Pipe> down = rt.Connect(mem, runs);
  if (!down.ok()) return down.status();
  std::atomic<int> written{0};
  for (int r = 0; r < kRuns; ++r) {
    Result<Handle> h = down->Submit(r * kRun, r * kRun, kRun,
                                    [&written](const Completion& c) { written += c.status.ok(); });
    if (!h.ok()) return h.status();
  }
  if (Status s = down->Drain(); !s.ok()) return s;
  std::printf("written %d runs; pipe stats %s\n", written.load(), down->stats().ToJson().c_str());
  return Status::Ok();
}

// (c) OS style: the runs read back as their completions arrive on the pipe's descriptor in epoll.
Status ReadBack(PipeRuntime& rt, const Locator& runs, const Locator& mem) {
  std::memset(mem.data(), 0, kRuns * kRun);
  Result<Pipe> back = rt.Connect(runs, mem);
  if (!back.ok()) return back.status();
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return Status::IoError(std::string("epoll_create1: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  epoll_ctl(ep, EPOLL_CTL_ADD, back->fd(), &ev);
  Status result;
  for (int r = 0; r < kRuns && result.ok(); ++r) result = back->Post(r * kRun, r * kRun, kRun, r);
  for (int got = 0; result.ok() && got < kRuns;) {
    if (epoll_wait(ep, &ev, 1, 10000) < 0 && errno != EINTR) {
      result = Status::IoError(std::string("epoll_wait: ") + std::strerror(errno));
    }
    PipeCompletion done[kRuns];
    for (std::size_t i = 0, n = back->Reap(done); i < n; ++i, ++got) {
      if (result.ok() && !done[i].status.ok()) result = done[i].status;
    }
  }
  close(ep);
  if (!result.ok()) (void)back->Drain();  // nothing in flight once we return; its error is ours
  return result;
}

// Each run is sorted; together they hold every value once.
bool Check(const std::byte* data) {
  const auto* v = reinterpret_cast<const std::uint64_t*>(data);
  for (int r = 0; r < kRuns; ++r) {
    if (!std::is_sorted(v + r * kRun / 8, v + (r + 1) * kRun / 8)) return false;
  }
  std::vector<std::uint64_t> merged(v, v + kRuns * kRun / 8);
  std::sort(merged.begin(), merged.end());
  for (std::size_t i = 0; i < merged.size(); ++i) {
    if (merged[i] != i) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  WorkDir dir(argc > 1 ? argv[1] : "/tmp");
  if (!dir.ok()) return Fail("work directory", Status::IoError(std::strerror(errno)));
  if (!MakeInput(dir.File("in"))) return Fail("input", Status::IoError(std::strerror(errno)));
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create();
  if (!rt.ok()) return Fail("runtime", rt.status());
  Result<Locator> in = (*rt)->File(dir.File("in"), 0, 0, FileMode::kRead);
  Result<Locator> mem = (*rt)->Memory(TierKind::kDram, -1, kRuns * kRun);
  Result<Locator> runs = (*rt)->File(dir.File("runs"), 0, kRuns * kRun, FileMode::kCreate);
  if (Status s = FirstError({in.status(), mem.status(), runs.status()}); !s.ok()) {
    return Fail("locators", s);
  }
  if (Status s = ReadAndSort(**rt, *in, *mem); !s.ok()) return Fail("read input", s);
  if (Status s = WriteRuns(**rt, *mem, *runs); !s.ok()) return Fail("write runs", s);
  if (Status s = ReadBack(**rt, *runs, *mem); !s.ok()) return Fail("read runs", s);
  const bool good = Check(mem->data());
  std::printf("%s\n", good ? "runs sorted, every value present" : "WRONG DATA");
  return good ? 0 : 1;
}
