// SPDX-License-Identifier: Apache-2.0
// A scratch directory on a disk file system (/var/tmp, O_DIRECT works there, unlike on tmpfs),
// removed with everything in it when the test ends; and a small tmpfs mounted for tests that
// need a full disk.
#pragma once

#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tierflow::testkit {

class TempDir {
 public:
  explicit TempDir(const char* under = "/var/tmp") {
    std::string pattern = std::string(under) + "/tierflow-test-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (mkdtemp(name.data()) != nullptr) path_ = name.data();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

  // Writes `data` to a new file and returns its path.
  template <typename Bytes>
  std::string Write(const std::string& name, const Bytes& data) const {
    std::ofstream out(File(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size()));
    return File(name);
  }
  // The whole content of a file.
  std::vector<unsigned char> Read(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  std::string path_;
};

// A tmpfs of `bytes` mounted on a fresh directory; unmounted when destroyed. mounted() is false
// where mounting is not permitted (not root, a container without CAP_SYS_ADMIN): skip then.
class SmallFileSystem {
 public:
  explicit SmallFileSystem(std::size_t bytes) : dir_("/tmp") {
    if (!dir_.ok()) return;
    const std::string opts = "size=" + std::to_string(bytes);
    mounted_ = mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  ~SmallFileSystem() {
    if (mounted_) umount2(dir_.path().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  // Remounts it read-only (files in it can then be opened for reading only, even by root).
  bool MakeReadOnly() {
    return mount("tmpfs", dir_.path().c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }
  std::string File(const std::string& name) const { return dir_.File(name); }

 private:
  TempDir dir_;
  bool mounted_ = false;
};

}  // namespace tierflow::testkit
