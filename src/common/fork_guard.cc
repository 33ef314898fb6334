// SPDX-License-Identifier: Apache-2.0
#include "common/fork_guard.h"

#include <pthread.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace tierflow {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<ForkAware*> objects;
};
Registry& TheRegistry() {
  static Registry* r = new Registry;  // never destroyed: fork() may come after main returns
  return *r;
}

void Prepare() {
  Registry& r = TheRegistry();
  r.mu.lock();  // held across fork(): no registration changes meanwhile
  for (auto it = r.objects.rbegin(); it != r.objects.rend(); ++it) (*it)->PrepareFork();
}
void Parent() {
  Registry& r = TheRegistry();
  for (ForkAware* o : r.objects) o->AfterForkParent();
  r.mu.unlock();
}
void Child() {
  Registry& r = TheRegistry();
  for (ForkAware* o : r.objects) o->AfterForkChild();
  r.mu.unlock();
}

}  // namespace

void RegisterForkAware(ForkAware* object, bool leaf) {
  static const int installed = pthread_atfork(&Prepare, &Parent, &Child);
  (void)installed;
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  if (leaf) {
    r.objects.insert(r.objects.begin(), object);
  } else {
    r.objects.push_back(object);
  }
}

void UnregisterForkAware(ForkAware* object) {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  r.objects.erase(std::remove(r.objects.begin(), r.objects.end(), object), r.objects.end());
}

}  // namespace tierflow
