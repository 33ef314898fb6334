// SPDX-License-Identifier: Apache-2.0
// Cache-line maintenance over Python buffers (tierflow/coherence.h): write-back, invalidate
// and both, on the calling thread, with the fence each call asks for. For memory another agent
// writes without keeping caches coherent (a CXL pool shared by hosts, a device).
#include <nanobind/stl/string.h>

#include <string>

#include "common.h"
#include "tierflow/coherence.h"

namespace tierflow::python {

namespace {

CoherenceOptions Options(const std::string& instruction, const std::string& fence) {
  CoherenceOptions o;
  o.instruction = Take(ParseLineInstruction(instruction));
  if (fence == "complete") {
    o.fence = MaintenanceFence::kComplete;
  } else if (fence == "fence") {
    o.fence = MaintenanceFence::kFence;
  } else if (fence == "none") {
    o.fence = MaintenanceFence::kNone;
  } else {
    Check(Status::InvalidArgument("fence='" + fence + "': give 'complete', 'fence' or 'none'"));
  }
  return o;
}

template <Status (*F)(const void*, size_t, const CoherenceOptions&)>
void Maintain(nb::handle range, const std::string& instruction, const std::string& fence) {
  View v = View::Of(range, false, "range");
  const CoherenceOptions o = Options(instruction, fence);
  Status s;
  {
    nb::gil_scoped_release r;
    s = F(v.data(), v.size(), o);
  }
  Check(s);
}

}  // namespace

void BindCoherence(nb::module_& m) {
  auto def = [&](const char* name, auto fn, const char* doc) {
    m.def(name, fn, nb::arg("range"), nb::arg("instruction") = "auto",
          nb::arg("fence") = "complete", doc);
  };
  def("write_back",
      &Maintain<static_cast<Status (*)(const void*, size_t, const CoherenceOptions&)>(&WriteBack)>,
      "Writes the buffer's dirty cache lines back to memory (they may stay cached).");
  def("invalidate",
      &Maintain<static_cast<Status (*)(const void*, size_t, const CoherenceOptions&)>(&Invalidate)>,
      "Drops the buffer's cache lines, so that the next reads come from memory (dirty lines are "
      "written back first, never lost).");
  def("write_back_invalidate",
      &Maintain<static_cast<Status (*)(const void*, size_t, const CoherenceOptions&)>(
          &WriteBackInvalidate)>,
      "Writes back and drops the buffer's lines. instruction: 'auto', 'clwb', 'clflushopt', "
      "'clflush', 'dc-cvac', 'dc-civac' (one this CPU lacks is an error); fence: 'complete' "
      "(the lines are in memory when it returns), 'fence', 'none'.");
  m.def("fence", &Fence, "Orders earlier maintenance before later stores.");
  m.def("complete", &Complete, "Waits until earlier maintenance has reached memory.");
  m.def(
      "coherence_support",
      [] {
        const CoherenceSupport& c = GetCoherenceSupport();
        nb::dict d;
        d["line_size"] = c.line_size;
        d["line_size_source"] = std::string(c.line_size_source);
        d["architecture"] = std::string(c.architecture);
        d["write_back"] = std::string(LineInstructionName(c.write_back));
        d["invalidate"] = std::string(LineInstructionName(c.invalidate));
        return d;
      },
      "The line size and the instructions 'auto' uses here.");
}

}  // namespace tierflow::python
