// SPDX-License-Identifier: Apache-2.0
// Merge, the second pass. The key space is cut into one part per thread at splitters taken from
// the runs' samples; each part is a loser tree over its key range of every run, written to its
// own range of the output (the parts' sizes are known once the splitters are placed in the
// runs). In a part each run has two read-ahead buffers (one consumed while the next block is
// read through a pipe); the output has two write-behind buffers, placed so that memory and file
// offsets share their alignment (O_DIRECT). The merge checks as it goes that keys never
// decrease and that every record comes out once.
#include <algorithm>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sort/context.h"
#include "sort/plan.h"
#include "sort/temp_files.h"

namespace tierflow::extsort {

namespace {

// One part: for each run the byte range [begin, end) of the runs file it merges, where its
// buffers are in the arena, and where its output starts.
struct Part {
  std::vector<std::uint64_t> begin, end;
  std::uint64_t arena_offset = 0, arena_bytes = 0;
  std::uint64_t out_offset = 0, records = 0;
};

struct Source {
  std::uint64_t next = 0, end = 0;  // file offsets of the next block to read and of the range's end
  std::uint64_t skip = 0;           // bytes before the range in the first block
  std::uint64_t buf[2] = {0, 0};    // arena offsets of the two buffers
  std::uint64_t len[2] = {0, 0};
  Handle h[2];
  int cur = 0;
  const std::byte* p = nullptr;
  const std::byte* e = nullptr;
};

class Merger {
 public:
  Merger(Context& c, Pipe in, Pipe out, const Part& part)
      : c_(c),
        in_(in),
        out_(out),
        part_(part),
        m_(PlanMerge(c.config.format, part.arena_bytes, c.runs)),
        out_base_(part.arena_offset + part.out_offset % 4096),
        buffers_base_(part.arena_offset + 8192 + 2 * m_.write_bytes),
        out_offset_(part.out_offset) {}
  Status Run();

 private:
  Status Start();
  Status Refill(std::size_t s, int b);
  Status Advance(std::size_t s);
  Status Emit(std::size_t s);
  Status Flush();
  // Each run's current key and its number in one value, (key << 32) | run: the loser tree
  // compares and moves these alone, with no load through a run's index and no branch on which
  // wins (the comparison is random for random keys). Keys have 80 bits, so a finished run's
  // value (kDone and up) is above every key, and equal keys come out in run order.
  static constexpr unsigned __int128 kDone = ~static_cast<unsigned __int128>(0) << 32;
  void Adjust(std::uint32_t s) {
    unsigned __int128 cur = keys_[s];
    for (std::size_t t = (s + keys_.size()) / 2; t > 0; t /= 2) {
      const unsigned __int128 node = tree_[t];
      const bool node_wins = node < cur;
      tree_[t] = node_wins ? cur : node;
      cur = node_wins ? node : cur;
    }
    tree_[0] = cur;
  }
  void Build();
  void SetKey(std::size_t s) {
    const Key k = KeyOf(c_.config.format, src_[s].p);
    keys_[s] = (k.Number() << 32) | s;
  }
  void SetDone(std::size_t s) { keys_[s] = kDone | s; }

  std::uint64_t OutBuffer(int k) const { return out_base_ + k * m_.write_bytes; }

  Context& c_;
  Pipe in_, out_;
  const Part& part_;
  MergePlan m_;
  std::uint64_t out_base_, buffers_base_;
  std::vector<Source> src_;
  std::vector<unsigned __int128> keys_;  // per run, as the tree holds them
  std::vector<unsigned __int128> tree_;  // [0] the winner, [1, k) the losers
  // Output: two buffers (OutBuffer), filled in turn.
  int out_cur_ = 0;
  std::uint64_t out_fill_ = 0, out_offset_ = 0;
  Handle out_h_[2];
  std::uint64_t emitted_ = 0;
  unsigned __int128 last_ = 0;
};

Status Merger::Refill(std::size_t s, int b) {
  Source& r = src_[s];
  r.len[b] = std::min(m_.read_bytes, r.end - r.next);
  if (r.len[b] == 0) return Status::Ok();
  Result<Handle> h = in_.Submit(r.next, r.buf[b], r.len[b]);
  if (!h.ok()) return h.status();
  r.h[b] = std::move(*h);
  r.next += r.len[b];
  return Status::Ok();
}

Status Merger::Start() {
  const std::size_t k = c_.runs;
  const std::uint64_t block = BlockBytes(c_.config.format);
  src_.resize(k);
  for (std::size_t s = 0; s < k; ++s) {
    Source& r = src_[s];
    r.next = part_.begin[s] / block * block;  // reads start aligned; the head is skipped
    r.skip = part_.begin[s] - r.next;
    r.end = part_.end[s];
    r.buf[0] = buffers_base_ + 2 * s * m_.read_bytes;
    r.buf[1] = r.buf[0] + m_.read_bytes;
    if (part_.begin[s] == r.end) continue;  // no records of this run in this key range
    if (Status st = Refill(s, 0); !st.ok()) return st;
    if (Status st = Refill(s, 1); !st.ok()) return st;
  }
  keys_.assign(k, 0);
  for (std::size_t s = 0; s < k; ++s) {
    Source& r = src_[s];
    if (part_.begin[s] == part_.end[s]) {
      SetDone(s);
      continue;
    }
    if (Status st = r.h[0].Wait(); !st.ok()) return st;
    r.p = c_.arena.data() + r.buf[0] + r.skip;
    r.e = c_.arena.data() + r.buf[0] + r.len[0];
    SetKey(s);
  }
  Build();
  return Status::Ok();
}

// A tournament from the leaves (positions k..2k-1) up: each inner node keeps the loser.
void Merger::Build() {
  const std::size_t k = src_.size();
  std::vector<unsigned __int128> winner(2 * k);
  for (std::size_t s = 0; s < k; ++s) winner[k + s] = keys_[s];
  tree_.assign(k, 0);
  for (std::size_t n = k - 1; n >= 1; --n) {
    const unsigned __int128 a = winner[2 * n], b = winner[2 * n + 1];
    winner[n] = std::min(a, b);
    tree_[n] = std::max(a, b);
  }
  tree_[0] = k == 1 ? keys_[0] : winner[1];
}

// The run's current block is used up: switch to the other buffer and read ahead into this one.
Status Merger::Advance(std::size_t s) {
  Source& r = src_[s];
  r.p += c_.record;
  if (r.p < r.e) {
    __builtin_prefetch(r.p + 1024);  // each run is a stream; dozens of them defeat the prefetcher
    SetKey(s);
    return Status::Ok();
  }
  const int other = 1 - r.cur;
  if (r.len[other] == 0 || !r.h[other].valid()) {
    SetDone(s);
    return Status::Ok();
  }
  if (Status st = r.h[other].Wait(); !st.ok()) return st;
  r.h[other] = Handle();
  const int used = r.cur;
  r.cur = other;
  r.p = c_.arena.data() + r.buf[other];
  r.e = r.p + r.len[other];
  SetKey(s);
  r.len[used] = 0;
  return Refill(s, used);
}

Status Merger::Flush() {
  if (out_fill_ == 0) return Status::Ok();
  Result<Handle> h =
      out_.Submit(OutBuffer(out_cur_), out_offset_, out_fill_,
                  // The context, not this merger: a merger that fails returns while its writes
                  // are in flight, and Merge drains them after the merger is gone.
                  [&done = c_.done, n = out_fill_](const Completion&) { done.fetch_add(n); });
  if (!h.ok()) return h.status();
  out_h_[out_cur_] = std::move(*h);
  out_offset_ += out_fill_;
  out_fill_ = 0;
  out_cur_ = 1 - out_cur_;
  if (out_h_[out_cur_].valid()) return out_h_[out_cur_].Wait();
  return Status::Ok();
}

Status Merger::Emit(std::size_t s) {
  const std::byte* r = src_[s].p;
  const unsigned __int128 k = keys_[s] >> 32;
  if (k < last_) {
    return Status::IoError(
        fmt::format("merge produced record {} out of order: the runs file {} "
                    "was changed while the sort ran?",
                    emitted_, c_.config.runs));
  }
  last_ = k;
  ++emitted_;
  std::memcpy(c_.arena.data() + OutBuffer(out_cur_) + out_fill_, r, c_.record);
  out_fill_ += c_.record;
  return out_fill_ + c_.record > m_.write_bytes ? Flush() : Status::Ok();
}

Status Merger::Run() {
  if (Status s = Start(); !s.ok()) return s;
  while (emitted_ < part_.records) {
    const auto w = static_cast<std::uint32_t>(tree_[0]);
    if (tree_[0] >= kDone) {
      return Status::IoError(fmt::format("the runs hold {} records, {} expected: {} changed?",
                                         emitted_, part_.records, c_.config.runs));
    }
    if (Status s = Emit(w); !s.ok()) return s;
    if (Status s = Advance(w); !s.ok()) return s;
    Adjust(w);
  }
  if (Status s = Flush(); !s.ok()) return s;
  for (Handle& h : out_h_) {
    if (h.valid()) {
      if (Status s = h.Wait(); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

}  // namespace

namespace {

// The key `threads - 1` splitters cut the samples of all runs into equal parts at.
std::vector<Key> Splitters(const Context& c, int threads) {
  std::vector<Key> all;
  for (const std::vector<Key>& keys : c.samples) all.insert(all.end(), keys.begin(), keys.end());
  std::sort(all.begin(), all.end());
  std::vector<Key> out;
  for (int t = 1; t < threads && !all.empty(); ++t) out.push_back(all[all.size() * t / threads]);
  return out;
}

// The file offset of run `s`'s first record with a key not below `key`: between two samples,
// found by reading that stretch of the run into the arena.
Result<std::uint64_t> Place(Context& c, Pipe& in, std::size_t s, const Key& key) {
  const std::vector<Key>& keys = c.samples[s];
  const std::uint64_t run = c.RunBegin(s);
  const std::uint64_t n = (c.RunEnd(s) - run) / c.record;
  const auto j =
      static_cast<std::uint64_t>(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin());
  if (j == 0) return run;
  const std::uint64_t first = (j - 1) * Context::kSampleEvery;
  const std::uint64_t count = std::min(n, j * Context::kSampleEvery) - first;
  if (Status st = in.Transfer(run + first * c.record, 0, count * c.record); !st.ok()) return st;
  std::uint64_t lo = 0, hi = count;  // the first record in [lo, hi) whose key is not below
  while (lo < hi) {
    const std::uint64_t mid = (lo + hi) / 2;
    if (KeyOf(c.config.format, c.arena.data() + mid * c.record) < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return run + (first + lo) * c.record;
}

Result<std::vector<Part>> MakeParts(Context& c, Pipe& in) {
  const int threads = std::max(1, std::min<int>(c.config.threads, static_cast<int>(c.records)));
  const std::vector<Key> split = Splitters(c, threads);
  std::vector<Part> parts(split.size() + 1);
  const std::uint64_t bytes = MergePartBytes(c.arena.capacity(), static_cast<int>(parts.size()));
  std::uint64_t out = 0;
  for (std::size_t t = 0; t < parts.size(); ++t) {
    Part& p = parts[t];
    p.arena_offset = t * (bytes + 8192);
    p.arena_bytes = bytes;
    p.out_offset = out;
    for (std::size_t s = 0; s < c.runs; ++s) {
      p.begin.push_back(t == 0 ? c.RunBegin(s) : parts[t - 1].end[s]);
      Result<std::uint64_t> e =
          t + 1 == parts.size() ? Result<std::uint64_t>(c.RunEnd(s)) : Place(c, in, s, split[t]);
      if (!e.ok()) return e.status();
      p.end.push_back(*e);
      p.records += (*e - p.begin.back()) / c.record;
    }
    out += p.records * c.record;
  }
  return parts;
}

Status MergeParts(Context& c, Pipe& in, Pipe& out) {
  Result<std::vector<Part>> parts = MakeParts(c, in);
  if (!parts.ok()) return parts.status();
  std::vector<Status> results(parts->size());
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < parts->size(); ++t) {
    pool.emplace_back([&, t] { results[t] = Merger(c, in, out, (*parts)[t]).Run(); });
  }
  results[0] = Merger(c, in, out, (*parts)[0]).Run();
  for (std::thread& t : pool) t.join();
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Status Merge(Context& c) {
  const std::uint64_t bytes = c.records * c.record;
  c.Phase("merge", bytes);
  Result<Locator> out = FileFor(c, "output", c.partial, bytes, FileMode::kCreate);
  if (!out.ok()) return out.status();
  if (!c.planned) TrackTempFile(c.partial);
  Result<Pipe> in = PipeFor(c, "read runs", c.runs_file, c.arena);
  Result<Pipe> op = PipeFor(c, "write output", c.arena, *out);
  if (!in.ok()) return in.status();
  if (!op.ok()) return op.status();
  Status s = MergeParts(c, *in, *op);
  const Status read = in->Drain(), written = op->Drain();
  // The runs' space goes now: the file is cut back to nothing, since the plan holds it open
  // until the sort ends. Best effort: if that fails, the space goes with the plan.
  if (c.planned) (void)c.rt->Release(c.runs_file, 0, c.runs_file.capacity());
  c.runs_file = Locator();
  return !s.ok() ? s : !read.ok() ? read : written;
}

}  // namespace tierflow::extsort
