// SPDX-License-Identifier: Apache-2.0
// tierflow.sort: the external sort of `tierflow sort` (apps/sort) as a function; the report is
// the CLI's JSON as a dict.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "common.h"
#include "sort/format.h"
#include "sort/report.h"
#include "sort/sort.h"
#include "sort/temp_files.h"

namespace tierflow::python {

namespace {

extsort::Config MakeConfig(const std::string& input, const std::string& output, uint64_t memory,
                           const std::string& format, std::optional<int> threads,
                           std::optional<std::string> dir) {
  extsort::Config c;
  c.format = Take(extsort::ParseFormat(format));
  if (input.empty() || output.empty()) {
    Check(Status::InvalidArgument("give the input file to sort and the output file to write"));
  }
  c.input = input;
  c.output = output;
  const std::string where = dir.value_or(std::filesystem::path(output).parent_path().string());
  c.runs = extsort::TempName((where.empty() ? std::string(".") : where) + "/" +
                                 std::filesystem::path(output).filename().string(),
                             "runs");
  c.memory_bytes = memory;
  c.threads = threads.value_or(static_cast<int>(std::thread::hardware_concurrency()));
  return c;
}

nb::object Sort(const std::string& input, const std::string& output, uint64_t memory, bool verify,
                const std::string& format, std::optional<int> threads,
                std::optional<std::string> dir, uint64_t generate, bool measure_floor,
                bool overwrite) {
  extsort::Config c = MakeConfig(input, output, memory, format, threads, dir);
  c.verify = verify;
  c.generate_bytes = generate;
  c.measure_floor = measure_floor;
  c.overwrite = overwrite;
  Result<extsort::Report> r = Status::Internal("not run");
  {
    nb::gil_scoped_release release;
    r = extsort::Run(c);
  }
  const extsort::Report report = Take(std::move(r));
  return nb::module_::import_("json").attr("loads")(extsort::ReportJson(report).dump());
}

}  // namespace

void BindSort(nb::module_& m) {
  m.def("sort", &Sort, nb::arg("input"), nb::arg("output"), nb::arg("memory") = 256u << 20,
        nb::arg("verify") = true, nb::arg("format") = "u64", nb::arg("threads") = nb::none(),
        nb::arg("dir") = nb::none(), nb::arg("generate") = 0, nb::arg("measure_floor") = false,
        nb::arg("overwrite") = false,
        nb::sig("def sort(input: str, output: str, memory: int = 268435456, verify: bool = True, "
                "format: str = 'u64', threads: int | None = None, dir: str | None = None, "
                "generate: int = 0, measure_floor: bool = False, overwrite: bool = False) -> "
                "dict[str, typing.Any]"),
        "Sorts the records of file `input` into `output` (created; an existing one only with "
        "overwrite) in at most `memory` bytes, as `tierflow sort` does: runs through pipes, "
        "then a merge. format: 'u64' (16-byte records, u64 key) or 'gensort' (the Sort "
        "Benchmark's 100-byte records). The runs go to `dir` (default: the output's "
        "directory). generate: first write that many bytes of records to `input`. "
        "measure_floor: also time the two-pass I/O floor. Returns the report as a dict "
        "(the keys of `tierflow sort --json`). The input is never modified; on an error "
        "nothing of the output or runs is left.");
}

}  // namespace tierflow::python
