// SPDX-License-Identifier: Apache-2.0
// The two columns of the qdp query: generated or read back, their expected result, and the
// column files that serve as the storage tier.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qdp/qdp.h"
#include "tierflow/status.h"
#include "tierflow/uring_engine.h"

namespace tierflow::qdp {

inline constexpr std::size_t kPage = 4096;

// The table in memory, before it is placed, and what the query over it must return.
struct ColumnData {
  std::vector<std::uint64_t> a, b;
  std::uint64_t x = 0;              // the filter: a < x
  std::uint64_t expected_sum = 0;   // SUM(b) WHERE a < x
  std::uint64_t b_fingerprint = 0;  // Fingerprint(b, rows, 0)
};

// Generates the columns (a, b uniform in [0, 2^32): the sum of 2^32 rows fits 64 bits), or
// reads them from data_dir/a.u64 and b.u64 with reuse_data, and computes the expected sum.
// Errors: missing, short or non-regular files, a value of a of 2^63 or more, a sum that does
// not fit 64 bits.
Result<ColumnData> LoadColumns(const Config& cfg);

// Rows first_row .. first_row+n-1 of a column with their values, as one number: sum of
// value * (2 * row + 1) mod 2^64. Pieces add up to the whole column's, and a value in the
// wrong row changes it but for a coincidence of powers of two (the weights differ).
std::uint64_t Fingerprint(const std::uint64_t* v, std::uint64_t n, std::uint64_t first_row);

// A column on the storage tier: a file, its mapping, and a descriptor for page-cache control.
struct StoredColumn {
  StoredColumn() = default;
  StoredColumn(const StoredColumn&) = delete;
  StoredColumn& operator=(const StoredColumn&) = delete;
  ~StoredColumn();
  std::string path;
  MappedFile map;
  int fd = -1;
};

// The column files of a run in their directory, which is removed afterwards when the run
// created it (no data_dir given).
struct ColumnFiles {
  ColumnFiles() = default;
  ColumnFiles(const ColumnFiles&) = delete;
  ColumnFiles& operator=(const ColumnFiles&) = delete;
  ~ColumnFiles();
  std::string dir;
  bool remove_dir = false;
  StoredColumn a, b;
};

// A new directory of this run's under TMPDIR (else /tmp), for column files.
Result<std::string> MakeDataDirectory();
// Writes the columns to data_dir (a new directory in /tmp when empty), or opens the files
// there with reuse_data, into `out`.
Status StoreColumns(const Config& cfg, const ColumnData& data, ColumnFiles& out);

// Pages of the column's file in the page cache (mincore).
std::uint64_t ResidentPages(const StoredColumn& c);

// Drops the column's pages from this process's mapping and from the page cache, so that the
// next read comes from storage. Fails if pages stay resident.
Status MakeCold(const StoredColumn& c);

}  // namespace tierflow::qdp
