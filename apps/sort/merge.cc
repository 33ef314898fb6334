// Merge, the second pass: one loser tree over all runs. Each run has two read-ahead buffers (one
// consumed while the next block is read through a pipe); the output has two write-behind buffers
// (one filled while the other is written through a pipe). The merge checks as it goes that keys
// never decrease and that every record comes out once.
#include <vector>

#include <fmt/format.h>

#include "sort/context.h"
#include "sort/plan.h"
#include "sort/temp_files.h"

namespace tierflow::extsort {

namespace {

struct Source {
  std::uint64_t next = 0, end = 0;  // file offsets of the next block to read and of the run's end
  std::uint64_t buf[2] = {0, 0};    // arena offsets of the two buffers
  std::uint64_t len[2] = {0, 0};
  Handle h[2];
  int cur = 0;
  const std::byte* p = nullptr;
  const std::byte* e = nullptr;
};

class Merger {
 public:
  Merger(Context& c, Pipe in, Pipe out, MergePlan m) : c_(c), in_(in), out_(out), m_(m) {}
  Status Run();

 private:
  Status Start();
  Status Refill(std::size_t s, int b);
  Status Advance(std::size_t s);
  Status Emit(std::size_t s);
  Status Flush();
  // Keys live in one flat array (the loser tree touches nothing else); a finished run holds the
  // largest key and loses ties against runs that still have records.
  bool Less(std::uint32_t a, std::uint32_t b) const {
    const unsigned __int128 ka = keys_[a], kb = keys_[b];
    return ka < kb || (ka == kb && done_[a] < done_[b]);
  }
  void Adjust(std::uint32_t s) {
    for (std::size_t t = (s + keys_.size()) / 2; t > 0; t /= 2) {
      if (Less(tree_[t], s)) std::swap(s, tree_[t]);
    }
    tree_[0] = s;
  }
  void Build();
  void SetKey(std::size_t s) {
    const Key k = KeyOf(c_.config.format, src_[s].p);
    keys_[s] = (static_cast<unsigned __int128>(k.hi) << 16) | k.lo;
  }

  Context& c_;
  Pipe in_, out_;
  MergePlan m_;
  std::vector<Source> src_;
  std::vector<unsigned __int128> keys_;
  std::vector<std::uint8_t> done_;
  std::vector<std::uint32_t> tree_;
  // Output: two buffers at arena offsets 0 and write_bytes.
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
  const std::uint64_t total = c_.records * c_.record;
  src_.resize(k);
  for (std::size_t s = 0; s < k; ++s) {
    Source& r = src_[s];
    r.next = s * c_.run_bytes;
    r.end = std::min(total, r.next + c_.run_bytes);
    r.buf[0] = 2 * m_.write_bytes + 2 * s * m_.read_bytes;
    r.buf[1] = r.buf[0] + m_.read_bytes;
    if (Status st = Refill(s, 0); !st.ok()) return st;
    if (Status st = Refill(s, 1); !st.ok()) return st;
  }
  for (std::size_t s = 0; s < k; ++s) {
    Source& r = src_[s];
    if (Status st = r.h[0].Wait(); !st.ok()) return st;
    r.p = c_.arena.data() + r.buf[0];
    r.e = r.p + r.len[0];
  }
  keys_.assign(k, 0);
  done_.assign(k, 0);
  for (std::size_t s = 0; s < k; ++s) SetKey(s);
  Build();
  return Status::Ok();
}

// A tournament from the leaves (positions k..2k-1) up: each inner node keeps the loser.
void Merger::Build() {
  const std::size_t k = src_.size();
  std::vector<std::uint32_t> winner(2 * k);
  for (std::size_t s = 0; s < k; ++s) winner[k + s] = static_cast<std::uint32_t>(s);
  tree_.assign(k, 0);
  for (std::size_t n = k - 1; n >= 1; --n) {
    const std::uint32_t a = winner[2 * n], b = winner[2 * n + 1];
    winner[n] = Less(a, b) ? a : b;
    tree_[n] = Less(a, b) ? b : a;
  }
  tree_[0] = k == 1 ? 0 : winner[1];
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
    done_[s] = 1;
    keys_[s] = ~static_cast<unsigned __int128>(0);
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
      out_.Submit(out_cur_ * m_.write_bytes, out_offset_, out_fill_,
                  [this, n = out_fill_](const Completion&) { c_.done.fetch_add(n); });
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
  const unsigned __int128 k = keys_[s];
  if (k < last_) {
    return Status::IoError(
        fmt::format("merge produced record {} out of order: the runs file {} "
                    "was changed while the sort ran?",
                    emitted_, c_.config.runs));
  }
  last_ = k;
  ++emitted_;
  std::memcpy(c_.arena.data() + out_cur_ * m_.write_bytes + out_fill_, r, c_.record);
  out_fill_ += c_.record;
  return out_fill_ + c_.record > m_.write_bytes ? Flush() : Status::Ok();
}

Status Merger::Run() {
  if (Status s = Start(); !s.ok()) return s;
  while (emitted_ < c_.records) {
    const std::uint32_t w = tree_[0];
    if (done_[w]) {
      return Status::IoError(fmt::format("the runs hold {} records, {} expected: {} changed?",
                                         emitted_, c_.records, c_.config.runs));
    }
    if (Status s = Emit(w); !s.ok()) return s;
    if (Status s = Advance(w); !s.ok()) return s;
    Adjust(w);
  }
  if (Status s = Flush(); !s.ok()) return s;
  return out_.Drain();
}

}  // namespace

Status Merge(Context& c) {
  const std::uint64_t bytes = c.records * c.record;
  c.Phase("merge", bytes);
  Result<Locator> out = c.rt->File(c.partial, 0, bytes, FileMode::kCreate);
  if (!out.ok()) return out.status();
  TrackTempFile(c.partial);
  Result<Pipe> in = c.rt->Connect(c.runs_file, c.arena, FilePipeOptions());
  Result<Pipe> op = c.rt->Connect(c.arena, *out, FilePipeOptions());
  if (!in.ok()) return in.status();
  if (!op.ok()) return op.status();
  Merger m(c, *in, *op, PlanMerge(c.config.format, c.arena.capacity(), c.runs));
  Status s = m.Run();
  const Status read = in->Drain(), written = op->Drain();
  c.runs_file = Locator();
  return !s.ok() ? s : !read.ok() ? read : written;
}

}  // namespace tierflow::extsort
