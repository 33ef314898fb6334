// SPDX-License-Identifier: Apache-2.0
// Files of pipes and calibration (security review, items 1, 2, 5 and 7 of issue 33): scratch
// files no one can plant, a calibration cache in a directory of the user's own written
// atomically and never fatal when damaged, a range written in place without truncating the
// file, and files opened as created, never again by name.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing/random_bytes.h"
#include "testing/temp_dir.h"
#include "tierflow/calibration.h"
#include "tierflow/pipe_runtime.h"
#include "tierflow/uring_engine.h"

namespace tierflow {
namespace {

using testkit::RandomBytes;
using testkit::TempDir;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Sets an environment variable (or unsets it, with nullopt) for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

// Item 1: the file figures never open a name someone could plant; nothing is left behind.
TEST(FileSafety, CalibrationScratchFilesCannotBePlanted) {
  TempDir dir;
  const std::string victim = dir.Write("victim", std::string("precious"));
  for (pid_t pid = getpid(); pid < getpid() + 4; ++pid) {
    for (const char* end : {"a", "b"}) {
      const std::string link = dir.File("tierflow-calibrate-" + std::to_string(pid) + "-" + end);
      ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
    }
  }
  const std::vector<std::string> before = Names(dir.path());
  Result<std::unique_ptr<IoUringEngine>> e = IoUringEngine::Create();
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  CalibrationOptions o;
  o.bytes = 1 << 20;
  o.repeats = 1;
  o.file_dir = dir.path();
  Result<Calibration> c = Calibration::Measure({}, e->get(), o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->Find(Mechanism::kUringWrite, "dram:0", "file").has_value());
  EXPECT_EQ(dir.Read(victim), std::vector<unsigned char>({'p', 'r', 'e', 'c', 'i', 'o', 'u', 's'}))
      << "a planted link redirected the calibration's writes";
  EXPECT_EQ(Names(dir.path()).size(), before.size()) << "calibration left files behind";
}

// Item 2: no shared fallback directory.
TEST(FileSafety, TheCalibrationCacheIsNeverInASharedDirectory) {
  ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  ScopedEnv home("HOME", std::nullopt);
  const std::string path = Calibration::DefaultPath();
  EXPECT_FALSE(path.starts_with("/tmp")) << path;
  if (!path.empty()) {
    EXPECT_TRUE(path.ends_with("/.cache/tierflow/calibration.json")) << path;
  }
  ScopedEnv relative("HOME", std::string("relative/home"));
  EXPECT_FALSE(Calibration::DefaultPath().starts_with("relative"))
      << "a relative HOME would put the cache wherever the program runs";
}

// Item 2: Save creates its temporary file itself: a planted link is never followed.
TEST(FileSafety, SavingTheCalibrationFollowsNoPlantedLink) {
  TempDir dir;
  const std::string victim = dir.Write("victim", std::string("precious"));
  const std::string path = dir.File("calibration.json");
  ASSERT_EQ(symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  Calibration c;
  c.Set({Mechanism::kCpu, "dram:0", "dram:0", 10.0, 1.0});
  ASSERT_TRUE(c.Save(path).ok());
  EXPECT_EQ(dir.Read(victim).size(), 8u) << "the victim was overwritten through the link";
  Result<Calibration> back = Calibration::Load(path, true);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->entries().size(), 1u);
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 077, 0u) << "the cache file is the user's alone";
}

// Item 2: a cache directory others can write, or another user's, is refused with the reason.
TEST(FileSafety, ACacheDirectoryOthersControlIsRefused) {
  TempDir dir;
  const std::string cache = dir.File("tierflow");
  ASSERT_EQ(mkdir(cache.c_str(), 0700), 0);
  EXPECT_TRUE(Calibration::CheckCacheDirectory(cache).ok());
  ASSERT_EQ(chmod(cache.c_str(), 0777), 0);
  Status open = Calibration::CheckCacheDirectory(cache);
  EXPECT_FALSE(open.ok());
  EXPECT_TRUE(Contains(open.message(), "chmod go-w")) << open.ToString();
  ASSERT_EQ(chmod(cache.c_str(), 0700), 0);
  if (geteuid() == 0) {
    ASSERT_EQ(chown(cache.c_str(), 54321, 54321), 0);
    Status theirs = Calibration::CheckCacheDirectory(cache);
    EXPECT_FALSE(theirs.ok());
    EXPECT_TRUE(Contains(theirs.message(), "not to you")) << theirs.ToString();
  }
  // The runtime does not use such a cache, and says why.
  ASSERT_EQ(chmod(cache.c_str(), 0777), 0);
  ScopedEnv xdg("XDG_CACHE_HOME", dir.path());
  Calibration c;
  c.Set({Mechanism::kCpu, "dram:0", "dram:0", 10.0, 1.0});
  ASSERT_TRUE(c.Save(cache + "/calibration.json").ok());
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create({});
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  EXPECT_TRUE(Contains((*rt)->calibration_note(), "warning: calibration cache not used"))
      << (*rt)->calibration_note();
  EXPECT_TRUE((*rt)->calibration().empty());
}

// Item 2: a damaged cache is ignored with a warning, never fatal.
TEST(FileSafety, AGarbageCacheIsIgnoredWithAWarning) {
  TempDir dir;
  const std::string cache = dir.File("tierflow");
  ASSERT_EQ(mkdir(cache.c_str(), 0700), 0);
  std::ofstream(cache + "/calibration.json") << "{ not json";
  ScopedEnv xdg("XDG_CACHE_HOME", dir.path());
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create({});
  ASSERT_TRUE(rt.ok()) << "a garbage cache stopped the runtime: " << rt.status().ToString();
  EXPECT_TRUE(Contains((*rt)->calibration_note(), "warning: calibration cache ignored"))
      << (*rt)->calibration_note();
  // An explicit file is the user's word: malformed, it is an error naming it.
  PipeRuntimeOptions explicit_file;
  explicit_file.calibration_path = cache + "/calibration.json";
  Result<std::unique_ptr<PipeRuntime>> strict = PipeRuntime::Create(explicit_file);
  EXPECT_FALSE(strict.ok());
}

std::unique_ptr<PipeRuntime> Runtime() {
  PipeRuntimeOptions o;
  o.calibration_path = "/nonexistent/calibration.json";
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  return rt.ok() ? std::move(*rt) : nullptr;
}

// Item 5: replacing a file from an offset would zero what lies before it: refused; kModify
// writes the range alone.
TEST(FileSafety, ARangeIsWrittenInPlaceNeverTruncated) {
  TempDir dir;
  const std::vector<unsigned char> original = RandomBytes(16384, 5);
  const std::string path = dir.Write("f", original);
  auto rt = Runtime();
  Result<Locator> replace = rt->File(path, 4096, 4096, FileMode::kReplace);
  ASSERT_FALSE(replace.ok());
  EXPECT_TRUE(Contains(replace.status().message(), "kModify")) << replace.status().ToString();
  EXPECT_EQ(dir.Read(path), original) << "a refused declaration truncated the file";
  const std::vector<unsigned char> data = RandomBytes(4096, 6);
  Result<Locator> mem = rt->Memory(TierKind::kDram, 0, 4096);
  ASSERT_TRUE(mem.ok());
  std::memcpy(mem->data(), data.data(), data.size());
  Result<Locator> range = rt->File(path, 4096, 4096, FileMode::kModify);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  Result<Pipe> p = rt->Connect(*mem, *range);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->Transfer(0, 0, 4096).ok());
  std::vector<unsigned char> want = original;
  std::memcpy(want.data() + 4096, data.data(), data.size());
  EXPECT_EQ(dir.Read(path), want);
}

// Item 7: written files are never reached through a link; a FIFO is refused, not waited on.
TEST(FileSafety, LocatorsRefuseLinksForWritingAndFifos) {
  TempDir dir;
  const std::string victim = dir.Write("victim", std::string("precious"));
  const std::string link = dir.File("link");
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  auto rt = Runtime();
  for (FileMode mode : {FileMode::kReplace, FileMode::kModify}) {
    Result<Locator> l = rt->File(link, 0, 8, mode);
    ASSERT_FALSE(l.ok());
    EXPECT_TRUE(Contains(l.status().message(), "symbolic link")) << l.status().ToString();
  }
  EXPECT_EQ(dir.Read(victim).size(), 8u);
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Result<Locator> f = rt->File(fifo, 0, 0, FileMode::kRead);
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(Contains(f.status().message(), "not a regular file")) << f.status().ToString();
}

// Item 7: the engine opens the file behind a descriptor, whatever its name has become.
TEST(FileSafety, TheEngineOpensTheDescriptorsFileNotItsName) {
  TempDir dir;
  const std::string path = dir.File("created");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(rename(path.c_str(), dir.File("moved").c_str()), 0);
  const std::string impostor = dir.Write("created", std::string("impostor"));
  Result<std::unique_ptr<IoUringEngine>> e = IoUringEngine::Create();
  ASSERT_TRUE(e.ok());
  Result<FileWindow> w = (*e)->OpenDescriptor(fd, path, {FileAccess::kReadWrite, 4096});
  close(fd);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const std::vector<unsigned char> data = RandomBytes(4096, 7);
  Result<Handle> h = (*e)->Submit(Operation::Copy(w->base(), data.data(), data.size()));
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(h->Wait().ok());
  EXPECT_EQ(dir.Read(dir.File("moved")), data);
  EXPECT_EQ(dir.Read(impostor).size(), 8u) << "the name was opened again";
  Result<FileWindow> none = (*e)->OpenDescriptor(-1, "nothing", {FileAccess::kRead, 0});
  EXPECT_FALSE(none.ok());
}

}  // namespace
}  // namespace tierflow
