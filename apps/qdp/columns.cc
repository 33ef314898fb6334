// SPDX-License-Identifier: Apache-2.0
#include "qdp/columns.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>

namespace tierflow::qdp {
namespace {

// Why a column file cannot be read back, or Ok when it holds at least `need` bytes.
Status CheckColumnFile(int fd, const std::string& path, std::uint64_t rows) {
  struct stat st {};
  const std::uint64_t need = rows * sizeof(std::uint64_t);
  if (fstat(fd, &st) != 0)
    return Status::IoError(fmt::format("cannot stat {}: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(fmt::format(
        "{} is not a regular file (a directory?): --reuse-data reads the column files a.u64 and "
        "b.u64 that an earlier run wrote into --data-dir",
        path));
  }
  if (st.st_size < static_cast<off_t>(sizeof(std::uint64_t))) {
    return Status::InvalidArgument(fmt::format(
        "{} is empty: write the columns again (tierflow qdp --data-dir DIR without --reuse-data)",
        path));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < need) {
    return Status::InvalidArgument(fmt::format(
        "{} is short: its {} bytes hold {} rows, --rows {} needs {} bytes; use --rows {} or "
        "fewer, or write the columns again (drop --reuse-data)",
        path, size, size / sizeof(std::uint64_t), rows, need, size / sizeof(std::uint64_t)));
  }
  return Status::Ok();
}

Status ReadAll(int fd, const std::string& path, std::uint64_t need, char* p) {
  for (std::uint64_t done = 0; done < need;) {
    ssize_t n = pread(fd, p + done, std::min<std::uint64_t>(need - done, 64 << 20),
                      static_cast<off_t>(done));
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      return Status::IoError(
          fmt::format("cannot read {} at offset {}: {}", path, done, std::strerror(err)));
    }
    done += static_cast<std::uint64_t>(n);
  }
  return Status::Ok();
}

// Opens a column file: an existing one for reading, or a new one (never an existing file,
// never through a symbolic link, and a FIFO is refused rather than waited on).
Result<int> OpenColumnFile(const std::string& path, bool create) {
  const int fd = create
                     ? open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)
                     : open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) return fd;
  const int err = errno;
  if (err == ENOENT && !create) {
    return Status::NotFound(fmt::format(
        "{} is missing: write the columns there first (tierflow qdp --data-dir DIR without "
        "--reuse-data), or drop --reuse-data to generate them",
        path));
  }
  if (err == EEXIST) {
    return Status::InvalidArgument(fmt::format(
        "{} exists and is not overwritten: read it with --reuse-data, or remove it (or choose "
        "another --data-dir) to write new columns",
        path));
  }
  if (err == ELOOP) {
    return Status::InvalidArgument(fmt::format(
        "{} is a symbolic link: column files are read and written under their own names in "
        "--data-dir; give the directory that holds them",
        path));
  }
  return Status::IoError(
      fmt::format("cannot {} {}: {}", create ? "create" : "open", path, std::strerror(err)));
}

// Reads the first `rows` values of a column file written earlier (--reuse-data).
Status ReadColumnFile(const std::string& path, std::uint64_t rows,
                      std::vector<std::uint64_t>& out) {
  Result<int> opened = OpenColumnFile(path, false);
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  Status s = CheckColumnFile(fd, path, rows);
  if (s.ok()) {
    out.resize(rows);
    s = ReadAll(fd, path, rows * sizeof(std::uint64_t), reinterpret_cast<char*>(out.data()));
  }
  close(fd);
  return s;
}

Status ExpectedSum(ColumnData& d) {
  __extension__ unsigned __int128 wide = 0;
  for (std::uint64_t i = 0; i < d.a.size(); ++i) {
    if (d.a[i] >> 63 != 0) {
      return Status::InvalidArgument(
          fmt::format("row {} of a holds {}: the filter compares values below "
                      "2^63 (regenerate the columns)",
                      i, d.a[i]));
    }
    wide += d.a[i] < d.x ? d.b[i] : 0;
  }
  if (wide >> 64 != 0) {
    return Status::InvalidArgument(
        "SUM(b) over these rows does not fit 64 bits: use fewer rows, smaller "
        "values of b, or a lower selectivity");
  }
  d.expected_sum = static_cast<std::uint64_t>(wide);
  return Status::Ok();
}

// A column file as the storage tier: its mapping and a descriptor for page-cache control.
// `fd` (the file checked or written): the column's from now on; the file is never opened by
// name again.
Status OpenColumn(const std::string& path, int fd, StoredColumn& out) {
  out.path = path;
  out.fd = fd;
  Result<MappedFile> m = MappedFile::Map(fd, path);
  if (!m.ok()) return m.status();
  out.map = std::move(*m);
  return Status::Ok();
}

Status OpenExistingColumn(const std::string& path, StoredColumn& out) {
  Result<int> fd = OpenColumnFile(path, false);
  if (!fd.ok()) return fd.status();
  struct stat st {};
  if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(*fd);
    return Status::InvalidArgument(
        fmt::format("{} is not a regular file: give the column files", path));
  }
  return OpenColumn(path, *fd, out);
}

Status WriteColumn(const std::string& path, const std::vector<std::uint64_t>& v,
                   StoredColumn& out) {
  const std::size_t bytes = v.size() * sizeof(std::uint64_t);
  Result<int> created = OpenColumnFile(path, true);
  if (!created.ok()) return created.status();
  const int fd = *created;
  const char* p = reinterpret_cast<const char*>(v.data());
  for (std::size_t done = 0; done < bytes;) {
    ssize_t n = pwrite(fd, p + done, std::min<std::size_t>(bytes - done, 64 << 20),
                       static_cast<off_t>(done));
    if (n <= 0) {
      close(fd);
      return Status::IoError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
    done += static_cast<std::size_t>(n);
  }
  // Not padded to a page: the file's length says how many rows it holds (--reuse-data checks
  // it); the storage engine reads an unaligned tail through the page cache.
  if (fsync(fd) != 0) {
    const int err = errno;
    close(fd);
    return Status::IoError(fmt::format("cannot finish {}: {}", path, std::strerror(err)));
  }
  return OpenColumn(path, fd, out);
}

}  // namespace

Result<ColumnData> LoadColumns(const Config& cfg) {
  ColumnData d;
  if (cfg.reuse_data) {
    if (Status s = ReadColumnFile(cfg.data_dir + "/a.u64", cfg.rows, d.a); !s.ok()) return s;
    if (Status s = ReadColumnFile(cfg.data_dir + "/b.u64", cfg.rows, d.b); !s.ok()) return s;
  } else {
    d.a.resize(cfg.rows);
    d.b.resize(cfg.rows);
    std::mt19937_64 rng(cfg.seed);
    for (std::uint64_t i = 0; i < cfg.rows; ++i) {
      d.a[i] = rng() >> 32;
      d.b[i] = rng() >> 32;
    }
  }
  d.x = static_cast<std::uint64_t>(cfg.selectivity * 4294967296.0);
  if (Status s = ExpectedSum(d); !s.ok()) return s;
  d.b_fingerprint = Fingerprint(d.b.data(), cfg.rows, 0);
  return d;
}

std::uint64_t Fingerprint(const std::uint64_t* v, std::uint64_t n, std::uint64_t first_row) {
  std::uint64_t f = 0;
  for (std::uint64_t i = 0; i < n; ++i) f += v[i] * (2 * (first_row + i) + 1);
  return f;
}

StoredColumn::~StoredColumn() {
  if (fd >= 0) close(fd);
}

ColumnFiles::~ColumnFiles() {
  if (remove_dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

Result<std::string> MakeDataDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::string pattern = parent + "/tierflow-qdp-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return Status::IoError(
        fmt::format("cannot create a data directory in {}: {} (set TMPDIR or give --data-dir)",
                    parent, std::strerror(errno)));
  }
  return pattern;
}

Status StoreColumns(const Config& cfg, const ColumnData& data, ColumnFiles& out) {
  out.dir = cfg.data_dir;
  if (out.dir.empty()) {
    Result<std::string> dir = MakeDataDirectory();
    if (!dir.ok()) return dir.status();
    out.dir = *dir;
    out.remove_dir = true;
  }
  if (cfg.reuse_data) {
    if (Status s = OpenExistingColumn(out.dir + "/a.u64", out.a); !s.ok()) return s;
    return OpenExistingColumn(out.dir + "/b.u64", out.b);
  }
  if (Status s = WriteColumn(out.dir + "/a.u64", data.a, out.a); !s.ok()) return s;
  return WriteColumn(out.dir + "/b.u64", data.b, out.b);
}

std::uint64_t ResidentPages(const StoredColumn& c) {
  const std::size_t pages = (c.map.size() + kPage - 1) / kPage;
  std::vector<unsigned char> vec(pages);
  if (mincore(const_cast<std::byte*>(c.map.data()), c.map.size(), vec.data()) != 0) return pages;
  std::uint64_t n = 0;
  for (unsigned char b : vec) n += b & 1;
  return n;
}

Status MakeCold(const StoredColumn& c) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    madvise(const_cast<std::byte*>(c.map.data()), c.map.size(), MADV_DONTNEED);
    posix_fadvise(c.fd, 0, 0, POSIX_FADV_DONTNEED);
    if (ResidentPages(c) == 0) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status(
      StatusCode::kFailed,
      fmt::format("{} keeps {} pages in the page cache after POSIX_FADV_DONTNEED (another "
                  "process maps it?): the run would not start cold",
                  c.path, ResidentPages(c)));
}

}  // namespace tierflow::qdp
