// SPDX-License-Identifier: Apache-2.0
// fork() in a process whose threads hold tierflow's locks, own its device portals or run its
// engines. Objects that care register here; around every fork() they are told to
//   PrepareFork:  take their locks (so that no lock is copied into the child held by a thread
//                 that does not exist there),
//   AfterForkParent: release them,
//   AfterForkChild:  release them and note that their threads and portals are gone; the
//                 object re-initialises (new threads, newly opened portals) when next used.
// Prepare runs in reverse registration order and the others in registration order, so an
// object registered after one it calls into (an engine after its device model) takes its
// locks first, as it does in normal operation.
#pragma once

#include <cstdint>

namespace tierflow {

class ForkAware {
 public:
  virtual void PrepareFork() = 0;
  virtual void AfterForkParent() = 0;
  virtual void AfterForkChild() = 0;

 protected:
  ~ForkAware() = default;
};

// `leaf`: the object's lock is taken while others are held but never the other way round
// (a pool's list lock): it is placed first, so it is locked last and released first, and the
// others' child handlers may use it.
void RegisterForkAware(ForkAware* object, bool leaf = false);
void UnregisterForkAware(ForkAware* object);

}  // namespace tierflow
