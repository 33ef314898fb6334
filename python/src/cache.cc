// SPDX-License-Identifier: Apache-2.0
// tierflow.OffloadCache (tierflow/cache.h): copies of source ranges on a faster tier, filled by
// engines. An entry holds its source's view (the source object stays alive and in place while
// the entry does) and the cache object (an entry may outlive the name it was reached by).
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "handles.h"
#include "tierflow/cache.h"
#include "tierflow/topology.h"

namespace tierflow::python {

namespace {

struct PyCache {
  std::unique_ptr<OffloadCache> cache;
  std::vector<nb::object> engines;  // outlive the cache
  nb::object topology;              // the cache plans on it: kept alive as long
};

struct PyEntry {
  CacheEntry entry;
  View source;
  nb::object cache;
  void Check() const {
    if (!entry.valid()) {
      python::Check(Status::InvalidArgument("this cache entry was released (with-block ended)"));
    }
  }
};

DirtyEntries ParseDirty(const std::string& d) {
  if (d == "refuse") return DirtyEntries::kRefuse;
  if (d == "write_back") return DirtyEntries::kWriteBack;
  if (d == "discard") return DirtyEntries::kDiscard;
  Check(Status::InvalidArgument("dirty='" + d + "': give 'refuse', 'write_back' or 'discard'"));
  return DirtyEntries::kRefuse;
}

std::unique_ptr<PyCache> CreateOn(const Topology& t, std::vector<nb::object> engines,
                                  std::map<int, size_t> capacity, int place_on,
                                  const std::string& policy) {
  auto py = std::make_unique<PyCache>();
  CacheConfig c;
  for (const nb::object& e : engines) {
    c.engines.push_back(&Arg<Engine>(e, "engines", "tierflow engines (CpuEngine, DsaEngine)"));
  }
  c.capacity = std::move(capacity);
  if (place_on >= 0) c.placement = [place_on](const void*, size_t, int) { return place_on; };
  c.copy_policy.kind = Take(ParsePolicyKind(policy));
  py->cache = Take(OffloadCache::Create(t, std::move(c)));
  py->engines = std::move(engines);
  py->topology = nb::find(&t);  // None for ThisSystem, which is never freed
  return py;
}

std::unique_ptr<PyCache> Create(std::vector<nb::object> engines, std::map<int, size_t> capacity,
                                int place_on, const std::string& policy) {
  return CreateOn(ThisSystem(), std::move(engines), std::move(capacity), place_on, policy);
}

PyEntry Access(nb::handle self, nb::handle src) {
  PyEntry e;
  e.source = View::Of(src, false, "src");
  e.entry = Take(nb::cast<PyCache&>(self).cache->Access(e.source.data(), e.source.size()));
  e.cache = nb::borrow(self);
  return e;
}

// A numpy view of the entry's bytes (the cached copy, or the source while not cached), owned by
// the entry's Python object.
nb::object Data(nb::handle self, bool writable) {
  PyEntry& e = nb::cast<PyEntry&>(self);
  e.Check();
  void* p = writable ? e.entry.mutable_data() : const_cast<void*>(e.entry.data());
  if (p == nullptr) {
    Check(Status::InvalidArgument(
        "the entry holds no cached copy to modify (not cached: its fill failed or found no "
        "room); modify the source instead"));
  }
  const size_t shape[1] = {e.entry.size()};
  nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>> a(static_cast<uint8_t*>(p), 1, shape, self);
  nb::object arr = nb::cast(a);
  if (!writable) arr.attr("flags").attr("writeable") = false;
  return arr;
}

nb::list Stats(const PyCache& c) {
  nb::list out;
  for (const CacheNodeStats& s : c.cache->stats()) {
    nb::dict d;
    d["node"] = s.node;
    d["tier"] = std::string(TierKindName(s.tier));
    d["hits"] = s.hits;
    d["late_hits"] = s.late_hits;
    d["misses"] = s.misses;
    d["not_cached"] = s.not_cached;
    d["failed_fills"] = s.failed_fills;
    d["evictions"] = s.evictions;
    d["invalidations"] = s.invalidations;
    d["write_backs"] = s.write_backs;
    d["bytes_used"] = s.bytes_used;
    d["capacity"] = s.capacity;
    d["entries"] = s.entries;
    out.append(d);
  }
  return out;
}

void BindEntry(nb::module_& m) {
  nb::class_<PyEntry>(m, "CacheEntry",
                      "A reference to a cached range; a context manager that releases it.")
      .def_prop_ro(
          "data", [](nb::handle s) { return Data(s, false); },
          nb::for_getter(nb::sig("def data(self) -> numpy.typing.NDArray[numpy.uint8]")),
          "The bytes (a read-only numpy uint8 view): the copy once cached, else the "
          "source.")
      .def_prop_ro(
          "mutable_data", [](nb::handle s) { return Data(s, true); },
          nb::for_getter(nb::sig("def mutable_data(self) -> numpy.typing.NDArray[numpy.uint8]")),
          "The cached copy to modify, then mark_dirty(); an error when not cached.")
      .def_prop_ro("size", [](const PyEntry& e) { return e.entry.size(); })
      .def_prop_ro("cached", [](const PyEntry& e) { return e.entry.valid() && e.entry.cached(); })
      .def_prop_ro("node", [](const PyEntry& e) { return e.entry.valid() ? e.entry.node() : -1; })
      .def_prop_ro("dirty", [](const PyEntry& e) { return e.entry.valid() && e.entry.dirty(); })
      .def(
          "wait",
          [](PyEntry& e) {
            e.Check();
            Status s;
            {
              nb::gil_scoped_release r;
              s = e.entry.Wait();
            }
            Check(s);
          },
          "Waits (GIL released) for the fill; raises its error.")
      .def(
          "mark_dirty",
          [](PyEntry& e) {
            e.Check();
            Check(e.entry.MarkDirty());
          },
          "Says the cached copy was modified: it is written back (or refused) as the cache's "
          "dirty-data contract says, never silently dropped.")
      .def(
          "release", [](PyEntry& e) { e.entry = CacheEntry(); },
          "Drops the reference (the cache may then evict the range).")
      .def(
          "__enter__", [](nb::handle s) { return nb::borrow(s); },
          nb::sig("def __enter__(self) -> CacheEntry"))
      .def("__exit__", [](PyEntry& e, nb::args) { e.entry = CacheEntry(); });
}

}  // namespace

void BindCache(nb::module_& m) {
  BindEntry(m);
  nb::class_<PyCache>(m, "OffloadCache",
                      "Copies of source ranges on a faster tier, filled asynchronously.")
      .def_static("create", &Create, nb::arg("engines"), nb::arg("capacity"),
                  nb::arg("place_on") = -1, nb::arg("copy_policy") = "single",
                  "engines: the Engines that fill it; capacity: {node: bytes} it may hold on "
                  "each node; place_on: the node every copy goes to (-1: the nearest faster "
                  "tier); copy_policy: 'single', 'push-pull', 'socket', 'brute-force', 'auto'.")
      .def_static("create", &CreateOn, nb::arg("topology"), nb::arg("engines"), nb::arg("capacity"),
                  nb::arg("place_on") = -1, nb::arg("copy_policy") = "single",
                  "The same, planned on `topology` (this system's, with its overrides), which "
                  "the cache keeps alive.")
      .def("access", &Access, nb::arg("src"),
           "The entry for `src` (a buffer-protocol object): a hit, or a fill started now.")
      .def(
          "invalidate",
          [](PyCache& c, nb::handle src, const std::string& dirty) {
            View v = View::Of(src, false, "src");
            return Take(c.cache->Invalidate(v.data(), v.size(), ParseDirty(dirty)));
          },
          nb::arg("src"), nb::arg("dirty") = "refuse",
          "Forgets the copies of `src`'s range (after the source changed); dirty: 'refuse' "
          "(raise, naming the dirty range), 'write_back', 'discard'. Returns how many.")
      .def(
          "clear",
          [](PyCache& c, const std::string& dirty) {
            return Take(c.cache->Clear(ParseDirty(dirty)));
          },
          nb::arg("dirty") = "refuse", "Forgets every unreferenced copy.")
      .def(
          "wait_for_fills",
          [](PyCache& c) {
            nb::gil_scoped_release r;
            c.cache->WaitForFills();
          },
          "Waits until no fill is running.")
      .def_prop_ro("stats", &Stats, "Per node: hits, misses, evictions, bytes used, ...");
}

}  // namespace tierflow::python
