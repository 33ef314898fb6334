// SPDX-License-Identifier: Apache-2.0
// tierflow.Operation: the constructors of tierflow/operation.h over Python buffers. Sizes come
// from the buffers (which must then agree) unless given; a buffer smaller than the size is
// refused here, before any engine sees the operation.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "files.h"
#include "operations.h"

namespace tierflow::python {

namespace {

using Size = std::optional<size_t>;

// `size`, or when not given the one size every view has: buffers of different sizes are
// refused rather than cut to the smaller (a compare of a prefix would answer "equal" for
// different buffers). Every view must hold the size.
size_t SizeOf(const Size& size, std::initializer_list<std::pair<const View*, const char*>> views) {
  const auto& [first, first_name] = *views.begin();
  const size_t n = size.value_or(first->size());
  for (auto [v, name] : views) {
    if (!size && v->size() != n) {
      Check(Status::InvalidArgument(std::string(first_name) + " holds " + std::to_string(n) +
                                    " bytes and " + name + " " + std::to_string(v->size()) +
                                    ": give size= for the bytes to cover, or buffers of one size"));
    }
  }
  for (auto [v, name] : views) {
    if (v->size() < n) {
      Check(Status::InvalidArgument(std::string(name) + " holds " + std::to_string(v->size()) +
                                    " bytes, fewer than the operation's " + std::to_string(n) +
                                    ": give a larger buffer or a smaller size"));
    }
  }
  return n;
}

PyOperation Copying(OpKind kind, nb::handle dst, nb::handle src, const Size& size) {
  PyOperation p;
  View d = Operand(dst, true, "dst", p);
  View s = Operand(src, false, "src", p);
  const size_t n = SizeOf(size, {{&d, "dst"}, {&s, "src"}});
  p.op = kind == OpKind::kCopy ? Operation::Copy(d.data(), s.data(), n)
                               : Operation::Move(d.data(), s.data(), n);
  p.views->push_back(std::move(d));
  p.views->push_back(std::move(s));
  return p;
}

PyOperation Fill(nb::handle dst, uint64_t pattern, const Size& size) {
  PyOperation p;
  View d = View::Of(dst, true, "dst");
  p.op = Operation::Fill(d.data(), pattern, SizeOf(size, {{&d, "dst"}}));
  p.views->push_back(std::move(d));
  return p;
}

PyOperation Compare(nb::handle a, nb::handle b, const Size& size) {
  PyOperation p;
  View x = View::Of(a, false, "a");
  View y = View::Of(b, false, "b");
  p.op = Operation::Compare(x.data(), y.data(), SizeOf(size, {{&x, "a"}, {&y, "b"}}));
  p.views->push_back(std::move(x));
  p.views->push_back(std::move(y));
  return p;
}

PyOperation ComparePattern(nb::handle src, uint64_t pattern, const Size& size) {
  PyOperation p;
  View s = View::Of(src, false, "src");
  p.op = Operation::ComparePattern(s.data(), pattern, SizeOf(size, {{&s, "src"}}));
  p.views->push_back(std::move(s));
  return p;
}

PyOperation Dualcast(nb::handle dst, nb::handle dst2, nb::handle src, const Size& size) {
  PyOperation p;
  View d = View::Of(dst, true, "dst");
  View d2 = View::Of(dst2, true, "dst2");
  View s = View::Of(src, false, "src");
  const size_t n = SizeOf(size, {{&d, "dst"}, {&d2, "dst2"}, {&s, "src"}});
  p.op = Operation::Dualcast(d.data(), d2.data(), s.data(), n);
  p.views->push_back(std::move(d));
  p.views->push_back(std::move(d2));
  p.views->push_back(std::move(s));
  return p;
}

PyOperation Crc32c(nb::handle src, uint32_t seed, const Size& size) {
  PyOperation p;
  View s = View::Of(src, false, "src");
  p.op = Operation::Crc32c(s.data(), SizeOf(size, {{&s, "src"}}), seed);
  p.views->push_back(std::move(s));
  return p;
}

// Write-back and invalidate name memory whose cache lines they maintain: never written, but
// an invalidate may drop what another agent wrote, so the range must be writable memory.
PyOperation Maintenance(OpKind kind, nb::handle range, const Size& size) {
  PyOperation p;
  // A file window's write-back is that engine's fdatasync, of a file opened for writing.
  View r = kind == OpKind::kWriteBack ? Operand(range, false, "range", p)
                                      : View::Of(range, true, "range");
  if (!p.files.empty() && !p.files.back()->window.writable()) {
    Check(Status::InvalidArgument("write_back: " + p.files.back()->window.path() +
                                  " is open read-only, so nothing of it needs syncing: open it "
                                  "with writable=True"));
  }
  const size_t n = SizeOf(size, {{&r, "range"}});
  p.op = kind == OpKind::kWriteBack    ? Operation::WriteBack(r.data(), n)
         : kind == OpKind::kInvalidate ? Operation::Invalidate(r.data(), n)
                                       : Operation::WriteBackInvalidate(r.data(), n);
  p.views->push_back(std::move(r));
  return p;
}

}  // namespace

void BindOperations(nb::module_& m) {
  const auto none = nb::none();
  nb::class_<PyOperation>(m, "Operation",
                          "One operation on Python buffers (any C-contiguous object with the "
                          "buffer protocol); build it with the static methods.")
      .def_static(
          "copy",
          [](nb::handle d, nb::handle s, Size n) { return Copying(OpKind::kCopy, d, s, n); },
          nb::arg("dst"), nb::arg("src"), nb::arg("size") = none,
          "dst <- src, size bytes (default: the buffers' size, which must then be one); the "
          "ranges must not overlap (use move).")
      .def_static(
          "move",
          [](nb::handle d, nb::handle s, Size n) { return Copying(OpKind::kMove, d, s, n); },
          nb::arg("dst"), nb::arg("src"), nb::arg("size") = none,
          "dst <- src with memmove semantics: the ranges may overlap.")
      .def_static("fill", &Fill, nb::arg("dst"), nb::arg("pattern"), nb::arg("size") = none,
                  "dst <- the 8-byte little-endian pattern repeated (the last copy cut short).")
      .def_static("compare", &Compare, nb::arg("a"), nb::arg("b"), nb::arg("size") = none,
                  "Compares a with b: the completion's equal and first_difference.")
      .def_static("compare_pattern", &ComparePattern, nb::arg("src"), nb::arg("pattern"),
                  nb::arg("size") = none, "Compares src with the pattern as fill writes it.")
      .def_static("dualcast", &Dualcast, nb::arg("dst"), nb::arg("dst2"), nb::arg("src"),
                  nb::arg("size") = none, "dst <- src and dst2 <- src; no two may overlap.")
      .def_static("crc32c", &Crc32c, nb::arg("src"), nb::arg("seed") = 0, nb::arg("size") = none,
                  "CRC-32C of src, continuing from seed: the completion's crc.")
      .def_static(
          "write_back", [](nb::handle r, Size n) { return Maintenance(OpKind::kWriteBack, r, n); },
          nb::arg("range"), nb::arg("size") = none,
          "Writes the range's dirty cache lines back to memory (tierflow/coherence.h).")
      .def_static(
          "invalidate", [](nb::handle r, Size n) { return Maintenance(OpKind::kInvalidate, r, n); },
          nb::arg("range"), nb::arg("size") = none,
          "Drops the range's cache lines (dirty ones written back first).")
      .def_static(
          "write_back_invalidate",
          [](nb::handle r, Size n) { return Maintenance(OpKind::kWriteBackInvalidate, r, n); },
          nb::arg("range"), nb::arg("size") = none, "Writes back and drops the range's lines.")
      .def_static(
          "drain",
          [] {
            PyOperation p;
            p.op = Operation::Drain();
            return p;
          },
          "Completes once every operation submitted to the same engine before it has.")
      .def_prop_ro(
          "kind", [](const PyOperation& p) { return std::string(OpKindName(p.op.kind)); },
          "The operation's kind ('copy', 'fill', ...).")
      .def_prop_ro(
          "size", [](const PyOperation& p) { return p.op.size; }, "Bytes it covers.");
}

}  // namespace tierflow::python
