// SPDX-License-Identifier: Apache-2.0
// Data pipes in their three flavours: a file read into DRAM with a blocking transfer, sorted
// runs written back with futures and callbacks, and read again through the pipe's eventfd in
// an epoll loop; the plan explained first. Usage: pipe_flavours [DIRECTORY]
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <tierflow/pipe_runtime.h>

using namespace tierflow;

namespace {

constexpr std::size_t kRun = 1 << 20;  // bytes per run
constexpr int kRuns = 8;

int Fail(const char* what, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  return 1;
}

// Writes kRuns runs of u64 values, descending, to `path` with plain POSIX calls.
bool MakeInput(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  for (std::uint64_t i = kRuns * kRun / 8; i-- > 0;) std::fwrite(&i, 8, 1, f);
  return std::fclose(f) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp";
  const std::string in_path = dir + "/pipe-flavours-in-" + std::to_string(getpid());
  const std::string runs_path = dir + "/pipe-flavours-runs-" + std::to_string(getpid());
  if (!MakeInput(in_path)) return Fail("input", Status::IoError(in_path));
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create();
  if (!rt.ok()) return Fail("runtime", rt.status());
  Result<Locator> in = (*rt)->File(in_path, 0, 0, FileMode::kRead);
  Result<Locator> mem = (*rt)->Memory(TierKind::kDram, -1, kRuns * kRun);
  Result<Locator> runs = (*rt)->File(runs_path, 0, kRuns * kRun, FileMode::kCreate);
  if (!in.ok() || !mem.ok() || !runs.ok()) return Fail("locators", in.status());
  std::vector<std::uint64_t> merged;
  int rc = 0;
  {
    // (a) Blocking: the whole input into DRAM.
    Result<Pipe> up = (*rt)->Connect(*in, *mem);
    if (!up.ok()) return Fail("connect", up.status());
    std::printf("%s", up->Explain().ToText().c_str());
    if (Status s = up->Transfer(0, 0, kRuns * kRun); !s.ok()) return Fail("transfer", s);
    auto* v = reinterpret_cast<std::uint64_t*>(mem->data());
    for (int r = 0; r < kRuns; ++r) std::sort(v + r * kRun / 8, v + (r + 1) * kRun / 8);

    // (b) Inversion of control: each run written with a future; a callback counts them.
    Result<Pipe> down = (*rt)->Connect(*mem, *runs);
    if (!down.ok()) return Fail("connect", down.status());
    std::atomic<int> written{0};
    for (int r = 0; r < kRuns; ++r) {
      Result<Handle> h = down->Submit(
          r * kRun, r * kRun, kRun, [&written](const Completion& c) { written += c.status.ok(); });
      if (!h.ok()) return Fail("submit", h.status());
    }
    if (Status s = down->Drain(); !s.ok()) return Fail("write runs", s);
    std::printf("written %d runs; pipe state %s\n", written.load(), down->stats().ToJson().c_str());

    // (c) OS style: the runs read back as their completions arrive on an eventfd in epoll.
    std::memset(mem->data(), 0, kRuns * kRun);
    Result<Pipe> back = (*rt)->Connect(*runs, *mem);
    if (!back.ok()) return Fail("connect", back.status());
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    epoll_ctl(ep, EPOLL_CTL_ADD, back->fd(), &ev);
    for (int r = 0; r < kRuns; ++r) {
      if (Status s = back->Post(r * kRun, r * kRun, kRun, r); !s.ok()) return Fail("post", s);
    }
    for (int got = 0; got < kRuns;) {
      if (epoll_wait(ep, &ev, 1, 10000) < 0 && errno != EINTR) break;
      PipeCompletion done[kRuns];
      for (std::size_t i = 0, n = back->Reap(done); i < n; ++i, ++got) {
        if (!done[i].status.ok()) return Fail("read run", done[i].status);
      }
    }
    close(ep);
    // Each run is sorted; together they hold every value once.
    for (int r = 0; r < kRuns && rc == 0; ++r) {
      rc = std::is_sorted(v + r * kRun / 8, v + (r + 1) * kRun / 8) ? 0 : 1;
    }
    merged.assign(v, v + kRuns * kRun / 8);
  }
  std::sort(merged.begin(), merged.end());
  for (std::size_t i = 0; i < merged.size() && rc == 0; ++i) rc = merged[i] == i ? 0 : 1;
  unlink(in_path.c_str());
  unlink(runs_path.c_str());
  std::printf("%s\n", rc == 0 ? "runs sorted, every value present" : "WRONG DATA");
  return rc;
}
