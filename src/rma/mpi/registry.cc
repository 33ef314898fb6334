// SPDX-License-Identifier: Apache-2.0
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <unordered_map>

#include <fmt/format.h>

#include "rma/mpi/window.h"

namespace tierflow::rma {

namespace {

// Open addressing over the handle's bits (a pointer in Open MPI, an int in MPICH). Lookups are
// lock-free: they run on every RMA call. Writers (window creation and free) take the mutex.
// Windows beyond the table's slots (thousands alive at once) go to a map under the mutex.
constexpr std::size_t kSlots = 4096;
struct Entry {
  std::atomic<std::uint64_t> key{0};
  std::atomic<Window*> window{nullptr};
};
std::array<Entry, kSlots> g_table;
std::mutex g_table_mu;
std::unordered_map<std::uint64_t, Window*> g_overflow;
std::atomic<bool> g_overflow_used{false};

std::uint64_t KeyOf(MPI_Win win) {
  std::uint64_t k = 0;
  static_assert(sizeof(win) <= sizeof(k));
  std::memcpy(&k, &win, sizeof(win));
  return k;
}

std::size_t Home(std::uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 52; }

struct MisuseText {
  int error_class;
  const char* text;
};

// Index = Misuse. The fix is part of each message: MPI prints it on MPI_ERRORS_ARE_FATAL.
const MisuseText kTexts[] = {
    {MPI_ERR_RMA_SYNC,
     "tierflow-rma: RMA call outside an access epoch to that target: open one first with "
     "MPI_Win_fence, MPI_Win_start (the target must post), MPI_Win_lock or MPI_Win_lock_all"},
    {MPI_ERR_RANK,
     "tierflow-rma: target rank not in the window's communicator or not in the group given to "
     "MPI_Win_start/MPI_Win_post: use a rank of that group"},
    {MPI_ERR_RMA_RANGE,
     "tierflow-rma: the access reaches beyond the target's window (displacement x disp_unit + "
     "extent > size): check the displacement, count and datatype"},
    {MPI_ERR_RMA_SYNC,
     "tierflow-rma: an epoch is still open on this window: close it (MPI_Win_complete, "
     "MPI_Win_wait, MPI_Win_unlock, a fence with MPI_MODE_NOSUCCEED) before this call"},
    {MPI_ERR_RMA_SYNC,
     "tierflow-rma: no matching synchronisation call: MPI_Win_complete needs MPI_Win_start, "
     "MPI_Win_wait/test need MPI_Win_post, MPI_Win_unlock/flush need MPI_Win_lock of that rank"},
    {MPI_ERR_TYPE,
     "tierflow-rma: the datatype cannot be used here (uncommitted, or not built from one "
     "predefined type for an accumulate): commit it or use a predefined type"},
    {MPI_ERR_OTHER, "tierflow-rma: a rank of this window exited while this rank waited for it"},
    {MPI_ERR_LOCKTYPE,
     "tierflow-rma: the lock type is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE"},
    {MPI_ERR_OP,
     "tierflow-rma: accumulates take a predefined operation (or MPI_REPLACE, MPI_NO_OP) on "
     "datatypes built from one predefined type, the same at origin and target"},
    {MPI_ERR_OTHER,
     "tierflow-rma: writing back or invalidating window memory failed (see the message on "
     "stderr): use TIERFLOW_RMA_COHERENCE=coherent on a host whose caches are coherent"},
    {MPI_ERR_OTHER,
     "tierflow-rma: a put or get offloaded to an engine failed (see the message on stderr): check "
     "the origin buffer, or use TIERFLOW_RMA_OFFLOAD=off to copy on the calling thread"},
};
static_assert(sizeof(kTexts) / sizeof(kTexts[0]) == static_cast<int>(Misuse::kCount));

std::once_flag g_codes_once;
int g_codes[static_cast<int>(Misuse::kCount)];

void MakeCodes() {
  for (int i = 0; i < static_cast<int>(Misuse::kCount); ++i) {
    g_codes[i] = kTexts[i].error_class;  // if adding fails, the class itself still says enough
    int code;
    if (PMPI_Add_error_code(kTexts[i].error_class, &code) == MPI_SUCCESS &&
        PMPI_Add_error_string(code, kTexts[i].text) == MPI_SUCCESS) {
      g_codes[i] = code;
    }
  }
}

}  // namespace

Window* FindWindow(MPI_Win win) {
  if (win == MPI_WIN_NULL) return nullptr;
  const std::uint64_t key = KeyOf(win);
  for (std::size_t i = Home(key), probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
    const std::uint64_t k = g_table[i].key.load(std::memory_order_acquire);
    if (k == key) return g_table[i].window.load(std::memory_order_acquire);
    if (k == 0) break;
  }
  if (!g_overflow_used.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(g_table_mu);
  auto it = g_overflow.find(key);
  return it == g_overflow.end() ? nullptr : it->second;
}

void AddWindow(Window* w) {
  std::lock_guard lock(g_table_mu);
  std::call_once(g_codes_once, MakeCodes);
  const std::uint64_t key = KeyOf(w->win);
  // The slot of this handle if it was used before, else the first freed slot of the chain,
  // else the empty slot that ends it: chains of other handles stay unbroken.
  Entry* use = nullptr;
  for (std::size_t i = Home(key), probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
    const std::uint64_t k = g_table[i].key.load();
    if (k == key) {
      use = &g_table[i];
      break;
    }
    if (k == 0) {
      if (use == nullptr) use = &g_table[i];
      break;
    }
    if (use == nullptr && g_table[i].window.load() == nullptr) use = &g_table[i];
  }
  if (use == nullptr) {
    g_overflow[key] = w;
    g_overflow_used.store(true, std::memory_order_release);
    return;
  }
  use->window.store(w, std::memory_order_release);
  use->key.store(key, std::memory_order_release);
}

void RemoveWindow(MPI_Win win) {
  std::lock_guard lock(g_table_mu);
  const std::uint64_t key = KeyOf(win);
  for (std::size_t i = Home(key), probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
    if (g_table[i].key.load() == key) {
      g_table[i].window.store(nullptr, std::memory_order_release);
      return;
    }
  }
  g_overflow.erase(key);
}

int Fail(const Window& w, Misuse what, const std::string& detail) {
  std::call_once(g_codes_once, MakeCodes);
  if (Verbose()) Say(w.me, detail);
  const int code = g_codes[static_cast<int>(what)];
  PMPI_Win_call_errhandler(w.report != MPI_WIN_NULL ? w.report : w.win, code);
  return code;
}

int SyncFailed(const Window& w, const Status& s) {
  if (s.code() != StatusCode::kFailed) return Fail(w, Misuse::kPeerGone, s.message());
  // A synchronisation word that broke the protocol leaves every rank of the window waiting for
  // something that will not come: after the error handler, the job ends rather than hangs.
  Say(w.me, s.message() + "; ending the job");
  const int code = Fail(w, Misuse::kCoherence, s.message());
  PMPI_Abort(w.comm, code);
  return code;
}

namespace {
std::atomic<int> g_held{0};
}  // namespace

Result<std::uint64_t> NumberFromEnvironment(const char* name, std::uint64_t fallback,
                                            std::uint64_t low, std::uint64_t high, const char* what,
                                            const char* unit) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || *v == '-' || n < low || n > high) {
    return Status::InvalidArgument(fmt::format("{}={} is not {}: give {} from {} to {} (unset: {})",
                                               name, v, what, unit, low, high, fallback));
  }
  return static_cast<std::uint64_t>(n);
}

Result<int> CommunicatorBudget() {
  static const Result<int> budget = []() -> Result<int> {
    Result<std::uint64_t> n =
        NumberFromEnvironment("TIERFLOW_RMA_COMMUNICATORS", 512, 0, 1'000'000, "a count",
                              "how many communicators the library may hold for its windows,");
    if (!n.ok()) return n.status();
    return static_cast<int>(*n);
  }();
  return budget;
}

int HeldCommunicators() { return g_held.load(std::memory_order_relaxed); }

void HoldCommunicators(int delta) { g_held.fetch_add(delta, std::memory_order_relaxed); }

bool Verbose() {
  static const bool verbose = [] {
    const char* v = std::getenv("TIERFLOW_RMA_VERBOSE");
    return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
  }();
  return verbose;
}

int Thrown(const char* call) noexcept {
  int rank = -1, up = 0, down = 0;
  if (PMPI_Initialized(&up) == MPI_SUCCESS && up && PMPI_Finalized(&down) == MPI_SUCCESS && !down) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  }
  try {
    throw;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "tierflow-rma[%d]: %s: out of memory: the transfer needs a staging "
                 "buffer of its size; use smaller counts or contiguous datatypes\n",
                 rank, call);
    return MPI_ERR_NO_MEM;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tierflow-rma[%d]: %s: internal error: %s\n", rank, call, e.what());
  } catch (...) {
    std::fprintf(stderr, "tierflow-rma[%d]: %s: internal error\n", rank, call);
  }
  return MPI_ERR_INTERN;
}

void Say(int rank, const std::string& line) {
  // Lines may quote the environment (TIERFLOW_RMA_COHERENCE, TIERFLOW_ISA): control characters
  // are shown as \xNN, never sent to the terminal.
  std::string shown;
  for (const char c : line) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && c != '\t') || b == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", b);
      shown += hex;
    } else {
      shown.push_back(c);
    }
  }
  std::fprintf(stderr, "tierflow-rma[%d]: %s\n", rank, shown.c_str());
}

}  // namespace tierflow::rma
