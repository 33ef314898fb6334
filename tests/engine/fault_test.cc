// SPDX-License-Identifier: Apache-2.0
// The engines' fault contract (issue 12, items 5 and 6): a memory fault on an operation's
// buffers — a read-only destination, a PROT_NONE page in a source, a file mapping past the end
// of its file — fails that operation with an error naming the range and the reason, and the
// process and the engine go on. Faults that are not tierflow's still end the process.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing/engine_fixture.h"
#include "testing/random_bytes.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/dsa_model.h"

namespace tierflow {
namespace {

using testkit::MakeCpuEngine;
using testkit::RandomBytes;

constexpr std::size_t kPage = 4096;

// Anonymous pages, each with its own protection.
class Pages {
 public:
  explicit Pages(std::size_t count) : size_(count * kPage) {
    p_ = static_cast<char*>(
        mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p_ == MAP_FAILED) std::abort();
    std::memset(p_, 0x5a, size_);
  }
  ~Pages() { munmap(p_, size_); }
  void Protect(std::size_t first, std::size_t count, int prot) {
    if (mprotect(p_ + first * kPage, count * kPage, prot) != 0) std::abort();
  }
  char* data() const { return p_; }
  std::size_t size() const { return size_; }

 private:
  char* p_;
  std::size_t size_;
};

Status RunOp(Engine& e, const Operation& op) {
  Result<Handle> h = e.Submit(op);
  if (!h.ok()) return h.status();
  return h->Wait();
}

void ExpectFault(const Status& s, const char* words) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
}

// Inline (4 KiB and below the inline limit), handed to one worker, and split into pieces.
class CpuEngineFaults : public ::testing::TestWithParam<std::size_t> {
 protected:
  std::unique_ptr<CpuEngine> engine_ = MakeCpuEngine();
  std::size_t pages() const { return GetParam() / kPage; }
};

TEST_P(CpuEngineFaults, ReadOnlyDestinationIsAnError) {
  Pages dst(pages()), src(pages());
  dst.Protect(pages() - 1, 1, PROT_READ);  // the last page
  ExpectFault(RunOp(*engine_, Operation::Copy(dst.data(), src.data(), dst.size())), "read-only");
  ExpectFault(RunOp(*engine_, Operation::Fill(dst.data(), 7, dst.size())), "writing");
  ExpectFault(RunOp(*engine_, Operation::Move(dst.data(), src.data(), dst.size())), "destination");
  std::vector<char> other(dst.size());
  ExpectFault(
      RunOp(*engine_, Operation::Dualcast(other.data(), dst.data(), src.data(), dst.size())),
      "read-only");
  EXPECT_GT(engine_->stats().pieces_failed, 0u);
  // The engine goes on.
  std::vector<char> a(dst.size(), 1), b(dst.size());
  ASSERT_TRUE(RunOp(*engine_, Operation::Copy(b.data(), a.data(), a.size())).ok());
  EXPECT_EQ(a, b);
}

TEST_P(CpuEngineFaults, UnreadableSourcePageIsAnError) {
  Pages src(pages()), src2(pages());
  src.Protect(pages() / 2, 1, PROT_NONE);
  std::vector<char> dst(src.size());
  Status s = RunOp(*engine_, Operation::Copy(dst.data(), src.data(), src.size()));
  ExpectFault(s, "not readable (PROT_NONE)");
  EXPECT_NE(s.message().find("source"), std::string::npos) << s.message();
  ExpectFault(RunOp(*engine_, Operation::Crc32c(src.data(), src.size())), "reading");
  ExpectFault(RunOp(*engine_, Operation::Compare(src2.data(), src.data(), src.size())),
              "second source");
  ExpectFault(
      RunOp(*engine_, Operation::ComparePattern(src.data(), 0x5a5a5a5a5a5a5a5aull, src.size())),
      "PROT_NONE");
  ExpectFault(RunOp(*engine_, Operation::WriteBack(src.data(), src.size())), "PROT_NONE");
  ExpectFault(RunOp(*engine_, Operation::Invalidate(src.data(), src.size())), "PROT_NONE");
  std::vector<char> ok(src.size(), 3);
  ASSERT_TRUE(RunOp(*engine_, Operation::Copy(dst.data(), ok.data(), ok.size())).ok());
}

TEST_P(CpuEngineFaults, FileMappingPastItsEndIsAnError) {
  char name[] = "/tmp/tierflow-fault-XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(GetParam())), 0);
  void* m = mmap(nullptr, GetParam(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  ASSERT_EQ(ftruncate(fd, 0), 0);  // truncated under the mapping: reads raise SIGBUS
  std::vector<char> dst(GetParam());
  ExpectFault(RunOp(*engine_, Operation::Copy(dst.data(), m, GetParam())),
              "beyond the end of the file");
  munmap(m, GetParam());
  close(fd);
  unlink(name);
}

TEST_P(CpuEngineFaults, BatchMemberFaultFailsTheBatchOnly) {
  Pages ro(pages());
  ro.Protect(0, pages(), PROT_READ);
  auto src = RandomBytes(ro.size(), 1);
  std::vector<unsigned char> good(ro.size());
  std::vector<Operation> ops = {Operation::Copy(good.data(), src.data(), src.size()),
                                Operation::Copy(ro.data(), src.data(), src.size())};
  Result<Handle> h = engine_->SubmitBatch(ops);
  ASSERT_TRUE(h.ok());
  ExpectFault(h->Wait(), "read-only");
  EXPECT_EQ(good, src) << "the other member ran";
}

INSTANTIATE_TEST_SUITE_P(Sizes, CpuEngineFaults,
                         ::testing::Values(kPage * 4, kPage * 64, kPage * 1024),
                         [](const auto& info) {
                           return std::to_string(info.param / 1024) + "KiB";
                         });

// Item 6: the device model treated mapped but unreadable pages as readable and crashed.
TEST(DsaModelFaults, UnreadableSourcePageFaultsAsTheDeviceWould) {
  DsaModelConfig c;
  c.instant = true;
  Result<std::shared_ptr<DsaDeviceModel>> model = DsaDeviceModel::Create(c);
  ASSERT_TRUE(model.ok());
  Result<std::unique_ptr<DsaEngine>> e = DsaEngine::CreateOnModel(*model, 0);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  Pages src(16);
  src.Protect(5, 1, PROT_NONE);
  std::vector<char> dst(src.size());
  Status s = RunOp(**e, Operation::Copy(dst.data(), src.data(), src.size()));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not readable"), std::string::npos) << s.message();
  EXPECT_FALSE(RunOp(**e, Operation::Crc32c(src.data(), src.size())).ok());
  EXPECT_FALSE(RunOp(**e, Operation::Compare(dst.data(), src.data(), src.size())).ok());
  std::vector<char> ok(src.size(), 9);
  ASSERT_TRUE(RunOp(**e, Operation::Copy(dst.data(), ok.data(), ok.size())).ok());
  EXPECT_EQ(dst, ok);

  // Prefaulting on the submitting thread touched only the first and last page's protection
  // and read sources unguarded: a PROT_NONE page in the middle crashed the caller.
  DsaEngineOptions o;
  o.prefault = true;
  Result<std::unique_ptr<DsaEngine>> pre = DsaEngine::CreateOnModel(*model, 0, o);
  ASSERT_TRUE(pre.ok());
  Result<Handle> h = (*pre)->Submit(Operation::Copy(dst.data(), src.data(), src.size()));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("not readable"), std::string::npos) << h.status().message();
  Pages ro(16);
  ro.Protect(7, 1, PROT_READ);
  h = (*pre)->Submit(Operation::Copy(ro.data(), ok.data(), ro.size()));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("read-only"), std::string::npos) << h.status().message();
}

// A fault that is not in an operation's buffers is not tierflow's to handle: with the handler
// installed, the process still ends with SIGSEGV, and a handler the program installed before
// tierflow's still gets the faults that are not tierflow's.
// GCC says __SANITIZE_*__, Clang __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TIERFLOW_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TIERFLOW_TEST_SANITIZED 1
#endif
#endif
#ifdef TIERFLOW_TEST_SANITIZED
constexpr bool kSanitized = true;  // the sanitizer's own handler reports other faults
#else
constexpr bool kSanitized = false;
#endif

TEST(FaultHandlerDeathTest, OtherFaultsStillEndTheProcess) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's handler takes the faults that are not tierflow's";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto engine = MakeCpuEngine();  // installs the handler
  EXPECT_EXIT(
      {
        Pages none(1);
        none.Protect(0, 1, PROT_NONE);
        *static_cast<volatile char*>(none.data()) = 1;  // not an operation's buffer
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

void ExitFromUserHandler(int) { _exit(42); }

TEST(FaultHandlerDeathTest, APreviousHandlerStillGetsOtherFaults) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's handler takes the faults that are not tierflow's";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_handler = &ExitFromUserHandler;
        sigaction(SIGSEGV, &sa, nullptr);
        auto engine = MakeCpuEngine();
        Pages ro(1);
        ro.Protect(0, 1, PROT_READ);
        std::vector<char> src(kPage);
        if (RunOp(*engine, Operation::Copy(ro.data(), src.data(), kPage)).ok()) _exit(1);
        *static_cast<volatile char*>(ro.data()) = 1;  // not an operation's buffer
      },
      ::testing::ExitedWithCode(42), "");
}

}  // namespace
}  // namespace tierflow
