// SPDX-License-Identifier: Apache-2.0
// /proc/self/maps read two ways (the kernel's PROCMAP_QUERY and the text) must describe the
// same mappings: private and shared anonymous memory, a memfd, a read-only page, a hole.
#include "common/mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tierflow {
namespace {

struct Seen {
  std::uintptr_t lo, hi;
  std::string perms, path;
  unsigned long inode;
  bool operator==(const Seen&) const = default;
};

std::vector<Seen> Read(std::uintptr_t begin, std::uintptr_t end, MapsSource source) {
  std::vector<Seen> out;
  out.reserve(16);  // no allocation while the maps are read
  EXPECT_TRUE(ForEachMapping(
      begin, end,
      [&](const MapsLine& m) {
        out.push_back({m.lo, m.hi, m.perms, m.path, m.inode});
        return true;
      },
      source));
  return out;
}

class Mapping : public ::testing::Test {
 protected:
  // Eight pages reserved, then remapped: private rw, shared rw, memfd, read-only, hole, ...
  void SetUp() override {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, 8 * page_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    base_ = static_cast<char*>(p);
    Fixed(0, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
    Fixed(1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1);
    fd_ = memfd_create("tierflow mapping test", MFD_CLOEXEC);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(ftruncate(fd_, static_cast<off_t>(page_)), 0);
    Fixed(2, PROT_READ | PROT_WRITE, MAP_SHARED, fd_);
    Fixed(3, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1);
    ASSERT_EQ(munmap(base_ + 4 * page_, page_), 0);  // a hole
    Fixed(5, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  }
  void TearDown() override {
    munmap(base_, 8 * page_);
    if (fd_ >= 0) close(fd_);
  }
  void Fixed(int i, int prot, int flags, int fd) {
    ASSERT_EQ(mmap(base_ + i * page_, page_, prot, flags | MAP_FIXED, fd, 0), base_ + i * page_);
  }
  std::uintptr_t At(int i) const { return reinterpret_cast<std::uintptr_t>(base_ + i * page_); }

  std::size_t page_ = 0;
  char* base_ = nullptr;
  int fd_ = -1;
};

TEST_F(Mapping, QueryAndTextAgree) {
  const std::vector<Seen> text = Read(At(0), At(8), MapsSource::kText);
  const std::vector<Seen> any = Read(At(0), At(8), MapsSource::kAny);
  EXPECT_EQ(any, text);
  ASSERT_EQ(text.size(), 6u);  // pages 0, 1, 2, 3, 5 and 6-7 (PROT_NONE), the hole left out
  EXPECT_EQ(text[0].perms, "rw-p");
  EXPECT_EQ(text[1].perms, "rw-s");
  EXPECT_NE(text[1].inode, 0u);  // shared anonymous memory is a file of its own (/dev/zero)
  EXPECT_EQ(text[2].perms, "rw-s");
  EXPECT_NE(text[2].inode, 0u);
  EXPECT_NE(text[2].path.find("memfd:tierflow mapping test"), std::string::npos) << text[2].path;
  EXPECT_EQ(text[3].perms, "r--p");
  EXPECT_EQ(text[4].lo, At(5));  // after the hole
  EXPECT_EQ(text[4].perms, "r-xp");
  EXPECT_EQ(text[5].perms, "---p");
}

TEST_F(Mapping, VisitStopsWhenAsked) {
  for (MapsSource source : {MapsSource::kText, MapsSource::kAny}) {
    int visits = 0;
    ForEachMapping(
        At(1), At(8),
        [&](const MapsLine& m) {
          ++visits;
          return m.lo < At(2);
        },
        source);
    EXPECT_EQ(visits, 2);
  }
}

TEST_F(Mapping, PageAccess) {
  EXPECT_TRUE(QueryPageAccess(base_).writable);
  const PageAccess ro = QueryPageAccess(base_ + 3 * page_);
  EXPECT_TRUE(ro.mapped && ro.readable && !ro.writable);
  EXPECT_FALSE(QueryPageAccess(base_ + 4 * page_).mapped);
}

}  // namespace
}  // namespace tierflow
