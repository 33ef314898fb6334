// SPDX-License-Identifier: Apache-2.0
// The first pass of the distributed sort. SampleSplitters reads a random sample of each rank's
// keys and cuts the key space at its quantiles. ExchangeRuns then reads the input run by run
// through a pipe (the next run while this one is exchanged), groups a run's records by the rank
// the splitters send them to and sends every rank its group with MPI_Ialltoallv (or MPI_Put
// into a window over the receivers' buffers, between fences), in steps that never send a rank
// more than one buffer; each step's received pieces are sorted and written,
// through a pipe, as a run of the rank's runs file. MeasureExchangeFloor times the same bytes
// through MPI_Ialltoallv alone, in the same steps.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "dsort/job.h"
#include "sort/plan.h"
#include "sort/radix.h"
#include "sort/temp_files.h"

namespace tierflow::dsort {

using extsort::Context;
using extsort::Mix;
using extsort::RecordBytes;

namespace {

// Waits for `req` without holding the CPU once it takes longer than a short spin: ranks that
// share CPUs (more ranks than cores, as on a small test machine) would otherwise spend the time
// the others need to reach the same collective.
void Await(MPI_Request& req) {
  int done = 0;
  for (int spins = 0; !done; ++spins) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done && spins >= 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// 4096 keys per rank: 256 places of 16 records (few reads; records next to each other are as
// good a sample as any where the input's order is random, and where it is not, 256 places
// still show its distribution).
constexpr std::uint64_t kSampleSpots = 256, kSampleRecords = 16;

// Keys of kSampleSpots x kSampleRecords records of the input: kSampleRecords consecutive at
// each of kSampleSpots random places (one read each), read through a pipe.
Result<std::vector<Key>> ReadSample(Job& j) {
  Context& c = j.c;
  const std::uint64_t run = std::min(kSampleRecords, j.input_records);
  std::vector<std::uint64_t> at(kSampleSpots);
  for (std::uint64_t i = 0; i < kSampleSpots; ++i) {
    const std::uint64_t r =
        Mix(j.config.seed ^ Mix((static_cast<std::uint64_t>(j.rank) << 32) + i));
    at[i] = r % (j.input_records - run + 1);
  }
  std::sort(at.begin(), at.end());
  Result<Pipe> pipe = c.rt->Connect(c.input, c.arena, extsort::FilePipeOptions());
  if (!pipe.ok()) return pipe.status();
  // Each read lands where its address agrees with its file offset on O_DIRECT's alignment:
  // a read that did not would be bounced through staging memory outside --memory.
  const std::uint64_t slot = (run * c.record + 2 * 4096 - 1) / 4096 * 4096;
  auto place = [&](std::uint64_t i) { return i * slot + at[i] * c.record % 4096; };
  std::vector<Handle> reads;
  for (std::uint64_t i = 0; i < kSampleSpots; ++i) {
    Result<Handle> h = pipe->Submit(at[i] * c.record, place(i), run * c.record);
    if (!h.ok()) return h.status();
    reads.push_back(std::move(*h));
  }
  std::vector<Key> keys;
  for (std::uint64_t i = 0; i < kSampleSpots; ++i) {
    if (Status s = reads[i].Wait(); !s.ok()) return s;
    for (std::uint64_t k = 0; k < run; ++k) {
      keys.push_back(extsort::KeyOf(c.config.format, c.arena.data() + place(i) + k * c.record));
    }
  }
  if (Status s = pipe->Drain(); !s.ok()) return s;
  return keys;
}

}  // namespace

Status SampleSplitters(Job& j) {
  Result<std::vector<Key>> mine = j.input_records == 0 ? std::vector<Key>{} : ReadSample(j);
  if (Status s = Agree(j, mine.status()); !s.ok()) return s;
  // Keys travel as bytes: every rank runs this very program.
  int bytes = static_cast<int>(mine->size() * sizeof(Key));
  std::vector<int> counts(j.ranks), displs(j.ranks);
  MPI_Allgather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, j.comm);
  int total = 0;
  for (int r = 0; r < j.ranks; ++r) {
    displs[r] = total;
    total += counts[r];
  }
  std::vector<Key> all(static_cast<std::size_t>(total) / sizeof(Key));
  MPI_Allgatherv(mine->data(), bytes, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE,
                 j.comm);
  j.splitters = ChooseSplitters(all, j.ranks);
  return Status::Ok();
}

namespace {

// The exchange's buffers, each ExchangePlan::buffer_bytes: two runs read (0 and 1), a run
// grouped by rank, two receive buffers, so that a step receives while the run received in the
// step before is still being written, and the sort's scratch.
constexpr int kGrouped = 2, kReceive = 3, kScratch = 5, kBuffers = 6;

}  // namespace

ExchangePlan PlanExchange(extsort::Format f, std::uint64_t arena, int ranks) {
  const std::uint64_t record = RecordBytes(f), block = extsort::BlockBytes(f);
  ExchangePlan p;
  // A buffer's bytes in MPI's int counts.
  p.buffer_bytes = std::min<std::uint64_t>(arena / kBuffers, 1024 * 1024 * 1024) / 4096 * 4096;
  // The records one buffer receives, their sort's scratch fitting in another.
  std::uint64_t fit = p.buffer_bytes / record;
  if (const std::uint64_t scratch = extsort::SortScratchBytes(f, fit); scratch > p.buffer_bytes) {
    fit =
        static_cast<std::uint64_t>(static_cast<double>(fit) * static_cast<double>(p.buffer_bytes) /
                                   static_cast<double>(scratch));
  }
  while (fit > 0 && extsort::SortScratchBytes(f, fit) > p.buffer_bytes) --fit;
  p.step_records = fit / static_cast<std::uint64_t>(ranks);
  // Runs a sixteenth smaller than what a step takes: splitters from a sample divide a run a
  // few percent unevenly, and a run that exceeded a step by a little would take a second step
  // (another exchange, and a short run for the merge) in every round.
  p.run_bytes = (fit - fit / 16) * record / block * block;
  if (p.run_bytes < block || p.step_records == 0) return {};
  return p;
}

namespace {

// One rank's part in the steps of a round: what it still has to send to each rank.
struct Steps {
  // Nothing to send yet, in steps of the exchange's size: a step sends every rank at most its
  // share of a receiver's buffer.
  Steps(const Job& j, const ExchangePlan& plan)
      : next(j.ranks, 0),
        end(j.ranks, 0),
        per_step(plan.step_records),
        send_bytes(j.ranks, 0),
        send_at(j.ranks, 0),
        recv_bytes(j.ranks, 0),
        recv_at(j.ranks, 0) {}
  std::vector<std::uint64_t> next, end;  // records: next to send and end, per rank
  std::uint64_t per_step = 0;            // records to one rank in one step
  std::vector<int> send_bytes, send_at, recv_bytes, recv_at;

  // This step's counts exchanged; returns the records this rank receives.
  std::uint64_t Plan(const Job& j, std::size_t record) {
    std::vector<std::uint64_t> out(j.ranks), in(j.ranks);
    for (int d = 0; d < j.ranks; ++d) out[d] = std::min(per_step, end[d] - next[d]);
    MPI_Request req;
    MPI_Ialltoall(out.data(), 1, MPI_UINT64_T, in.data(), 1, MPI_UINT64_T, j.comm, &req);
    Await(req);
    std::uint64_t received = 0;
    for (int d = 0; d < j.ranks; ++d) {
      send_bytes[d] = static_cast<int>(out[d] * record);
      send_at[d] = static_cast<int>(next[d] * record);
      recv_bytes[d] = static_cast<int>(in[d] * record);
      recv_at[d] = static_cast<int>(received * record);
      next[d] += out[d];
      received += in[d];
    }
    return received;
  }
  std::uint64_t Left() const {
    std::uint64_t left = 0;
    for (std::size_t d = 0; d < next.size(); ++d) left += end[d] - next[d];
    return left;
  }
};

struct Pass {
  Pass(Job& job, ExchangePlan p) : j(job), c(job.c), plan(p) {}
  Job& j;
  Context& c;
  ExchangePlan plan;
  std::uint64_t my_runs = 0, next_at = 0;
  Pipe in, out;
  Handle reads[2], writes[2];   // per receive buffer: the write of the run sorted there
  std::uint64_t steps = 0;      // so far, in every round: the receive buffer is steps % 2
  Status local = Status::Ok();  // the first error of this rank; it keeps taking part until the
                                // step where every rank learns of it
  bool stop = false;            // some rank failed: every rank leaves the rounds together

  std::byte* Buffer(int k) {
    return c.arena.data() + static_cast<std::uint64_t>(k) * plan.buffer_bytes;
  }
  std::uint64_t RunBytes(std::uint64_t run) const {
    return std::min(plan.run_bytes, j.input_records * c.record - run * plan.run_bytes);
  }
  void Read(std::uint64_t run) {
    if (!local.ok() || run >= my_runs) return;
    Result<Handle> h =
        in.Submit(run * plan.run_bytes, (run % 2) * plan.buffer_bytes, RunBytes(run));
    if (!h.ok()) local = h.status();
    if (h.ok()) reads[run % 2] = std::move(*h);
  }
  Status Round(std::uint64_t k);
  void WaitWrite(int v) {
    if (!writes[v].valid()) return;
    if (Status st = writes[v].Wait(); !st.ok() && local.ok()) local = st;
    writes[v] = Handle();
  }
  void Progress(std::uint64_t k);
  void Put(const Steps& s, const std::byte* grouped, int v);
  MPI_Win window = MPI_WIN_NULL;  // over buffers 3 and 4, for Exchange::kPut
  // Bytes so far: read from the input, sent to other ranks, received (all written when the
  // pass ends).
  std::uint64_t read = 0, sent = 0, received = 0;
  void Store(std::uint64_t records, int v);
  bool Step(Steps& s, const std::byte* grouped);
};

// The step's received records (in receive buffer v) sorted there and written from there as a
// run at the next block: the scratch is free again for the next step.
void Pass::Store(std::uint64_t records, int v) {
  if (records == 0 || !local.ok()) return;
  std::byte* sorted =
      extsort::SortRun(c.config.format, Buffer(kReceive + v), Buffer(kScratch), records);
  if (sorted != Buffer(kReceive + v)) {
    sorted = static_cast<std::byte*>(std::memcpy(Buffer(kReceive + v), sorted, records * c.record));
  }
  std::vector<Key>& keys = c.samples.emplace_back();
  for (std::uint64_t i = 0; i < records; i += Context::kSampleEvery) {
    keys.push_back(extsort::KeyOf(c.config.format, sorted + i * c.record));
  }
  const std::uint64_t block = extsort::BlockBytes(c.config.format);
  const std::uint64_t bytes = records * c.record;
  c.run_at.push_back(next_at);
  c.run_size.push_back(bytes);
  Result<Handle> h = out.Submit(static_cast<std::uint64_t>(sorted - c.arena.data()), next_at, bytes,
                                [this, bytes](const Completion&) { c.done.fetch_add(bytes); });
  next_at = (next_at + bytes + block - 1) / block * block;
  c.records += records;
  if (!h.ok()) local = h.status();
  if (h.ok()) writes[v] = std::move(*h);
}

// The step's pieces put into the receivers' receive buffer v (a window over both), each where
// its receiver places it; fences around. The first must be a barrier (not MPI_MODE_NOPRECEDE,
// which need not be one): no rank puts before every receiver is done with its buffer.
void Pass::Put(const Steps& s, const std::byte* grouped, int v) {
  std::vector<int> at(static_cast<std::size_t>(j.ranks));
  MPI_Alltoall(s.recv_at.data(), 1, MPI_INT, at.data(), 1, MPI_INT, j.comm);
  MPI_Win_fence(0, window);
  for (int d = 0; d < j.ranks; ++d) {
    if (s.send_bytes[d] == 0) continue;
    const auto disp =
        static_cast<MPI_Aint>(static_cast<std::uint64_t>(v) * plan.buffer_bytes) + at[d];
    MPI_Put(grouped + s.send_at[d], s.send_bytes[d], MPI_BYTE, d, disp, s.send_bytes[d], MPI_BYTE,
            window);
  }
  MPI_Win_fence(MPI_MODE_NOSUCCEED, window);
}

// One step; false once every rank has sent everything (or one failed).
bool Pass::Step(Steps& s, const std::byte* grouped) {
  const std::uint64_t received = s.Plan(j, c.record);
  // Every rank takes the same steps: v is the same receive buffer on every rank. The run
  // received into it two steps ago may still be being written from it.
  const int v = static_cast<int>(steps++ % 2);
  WaitWrite(v);
  if (window != MPI_WIN_NULL) {
    Put(s, grouped, v);
  } else {
    MPI_Request req;
    MPI_Ialltoallv(grouped, s.send_bytes.data(), s.send_at.data(), MPI_BYTE, Buffer(kReceive + v),
                   s.recv_bytes.data(), s.recv_at.data(), MPI_BYTE, j.comm, &req);
    Await(req);
  }
  for (int d = 0; d < j.ranks; ++d) sent += d == j.rank ? 0 : s.send_bytes[d];
  this->received += received * c.record;
  Store(received, v);
  const std::uint64_t mine[2] = {s.Left(), local.ok() ? 0u : 1u};
  std::uint64_t all[2];
  MPI_Request req;
  MPI_Iallreduce(mine, all, 2, MPI_UINT64_T, MPI_MAX, j.comm, &req);
  Await(req);
  stop = all[1] != 0;
  return all[0] != 0 && !stop;
}

// Every rank's bytes so far, in one line on rank 0 (collective: every rank calls it).
void Pass::Progress(std::uint64_t k) {
  const std::uint64_t mine[3] = {read, sent, received};
  std::vector<std::uint64_t> all(3 * static_cast<std::size_t>(j.ranks));
  MPI_Gather(mine, 3, MPI_UINT64_T, all.data(), 3, MPI_UINT64_T, 0, j.comm);
  if (j.rank != 0 || !j.config.progress) return;
  std::string line =
      fmt::format("exchange: round {} of {}; MiB read/sent/received by rank:", k + 1, j.rounds);
  auto mib = [](std::uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  for (int r = 0; r < j.ranks; ++r) {
    line += fmt::format(" {}: {:.1f}/{:.1f}/{:.1f}", r, mib(all[3 * r]), mib(all[3 * r + 1]),
                        mib(all[3 * r + 2]));
  }
  j.config.progress(line);
}

Status Pass::Round(std::uint64_t k) {
  Steps s(j, plan);
  const std::byte* grouped = Buffer(0);
  if (k < my_runs && local.ok()) {
    if (Status st = reads[k % 2].Wait(); !st.ok()) local = st;
    read += RunBytes(k);
    Read(k + 1);
  }
  if (k < my_runs && local.ok()) {
    // Only the receivers sort: a run is just grouped by rank here, each record's rank noted
    // in the scratch buffer (writes are only ever from the receive buffers).
    const std::uint64_t n = RunBytes(k) / c.record;
    grouped = Buffer(kGrouped);
    const std::vector<std::uint64_t> cut =
        Partition(c.config.format, Buffer(static_cast<int>(k % 2)), n, j.splitters,
                  Buffer(kGrouped), reinterpret_cast<std::uint16_t*>(Buffer(kScratch)));
    for (int d = 0; d < j.ranks; ++d) {
      s.next[d] = cut[d];
      s.end[d] = cut[d + 1];
    }
  }
  while (Step(s, grouped)) {
  }
  return stop ? Status::Cancelled("a rank failed") : Status::Ok();
}

}  // namespace

Status ExchangeRuns(Job& j) {
  Context& c = j.c;
  Pass pass(j, PlanExchange(c.config.format, c.arena.capacity(), j.ranks));
  const std::uint64_t bytes = j.input_records * c.record;
  pass.my_runs = (bytes + pass.plan.run_bytes - 1) / pass.plan.run_bytes;
  MPI_Allreduce(&pass.my_runs, &j.rounds, 1, MPI_UINT64_T, MPI_MAX, j.comm);
  j.report.run_bytes = pass.plan.run_bytes;
  // The runs file holds what this rank receives: at most everything, plus a block of padding
  // per run (at most ranks + 1 runs per round).
  const std::uint64_t block = extsort::BlockBytes(c.config.format);
  const std::uint64_t capacity = j.total_bytes + (j.rounds + 1) * (j.ranks + 1) * block;
  c.Phase("exchange", bytes);
  Result<Locator> runs = c.rt->File(c.config.runs, 0, capacity, FileMode::kCreate);
  if (runs.ok()) extsort::TrackTempFile(c.config.runs);
  // A rank with no input only receives: it has no pipe from an input.
  Result<Pipe> in = !runs.ok() ? Result<Pipe>(runs.status())
                    : j.input_records == 0
                        ? Result<Pipe>(Pipe())
                        : c.rt->Connect(c.input, c.arena, extsort::FilePipeOptions());
  Result<Pipe> out = in.ok() ? c.rt->Connect(c.arena, *runs, extsort::FilePipeOptions())
                             : Result<Pipe>(in.status());
  if (Status s = Agree(j, out.status()); !s.ok()) return s;
  c.runs_file = *runs;
  pass.in = *in;
  pass.out = *out;
  c.records = 0;
  if (j.config.exchange == Exchange::kPut) {
    MPI_Win_create(pass.Buffer(kReceive), static_cast<MPI_Aint>(2 * pass.plan.buffer_bytes), 1,
                   MPI_INFO_NULL, j.comm, &pass.window);
  }
  pass.Read(0);
  for (std::uint64_t k = 0; k < j.rounds; ++k) {
    if (!pass.Round(k).ok()) break;
    pass.Progress(k);
  }
  // Runs are written from the receive buffers: the writes end before the window over them is
  // freed (an MPI, or libtierflow_rma moving the pages back, may change that memory then).
  pass.WaitWrite(0);
  pass.WaitWrite(1);
  if (pass.window != MPI_WIN_NULL) MPI_Win_free(&pass.window);
  Status drained = j.input_records == 0 ? Status::Ok() : pass.in.Drain();
  if (Status w = pass.out.Drain(); drained.ok()) drained = w;
  c.runs = c.run_at.size();
  return Agree(j, pass.local.ok() ? drained : pass.local);
}

Status MeasureExchangeFloor(Job& j) {
  Context& c = j.c;
  const ExchangePlan plan = PlanExchange(c.config.format, c.arena.capacity(), j.ranks);
  // This rank's bytes, a like share to every rank, in steps of the exchange's size.
  const std::uint64_t share = j.input_records / static_cast<std::uint64_t>(j.ranks);
  Steps s(j, plan);
  s.end.assign(j.ranks, share);
  s.end[j.rank] = j.input_records - share * static_cast<std::uint64_t>(j.ranks - 1);
  MPI_Barrier(j.comm);
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    s.Plan(j, c.record);
    for (int d = 0; d < j.ranks; ++d) s.send_at[d] = 0;  // the same bytes again and again
    MPI_Request req;
    MPI_Ialltoallv(c.arena.data(), s.send_bytes.data(), s.send_at.data(), MPI_BYTE,
                   c.arena.data() + plan.buffer_bytes, s.recv_bytes.data(), s.recv_at.data(),
                   MPI_BYTE, j.comm, &req);
    Await(req);
    std::uint64_t left = s.Left(), any = 0;
    MPI_Iallreduce(&left, &any, 1, MPI_UINT64_T, MPI_MAX, j.comm, &req);
    Await(req);
    if (any == 0) break;
  }
  j.exchange_floor_ms = extsort::MsSince(t0);
  return Status::Ok();
}

}  // namespace tierflow::dsort
