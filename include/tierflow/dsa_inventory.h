// SPDX-License-Identifier: Apache-2.0
// Intel DSA devices and work queues, read from sysfs (the idxd driver's /sys/bus/dsa).
//
// Discovery only reads files: it never opens a work queue. For each WQ it says whether user
// space can submit to it and, when not, the exact reason and the fix. DsaEngine::Create opens
// and maps the portal and reports the errors only that can reveal (permissions, mmap refused).
//
// Thread-safety: an inventory is a value, immutable once discovered.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

// The CPU instructions user-space DSA submission needs, from CPUID (overridable for tests).
struct TIERFLOW_EXPORT DsaCpuFeatures {
  bool enqcmd = false;     // shared WQs: ENQCMD
  bool movdir64b = false;  // dedicated WQs: MOVDIR64B
  bool waitpkg = false;    // UMONITOR/UMWAIT/TPAUSE for waiting on completion records
  bool la57 = false;       // 5-level paging supported by the CPU (see DsaDevice::pasid_enabled)

  static DsaCpuFeatures Detect();
};

// How descriptors reach a work queue.
enum class DsaSubmitPath : std::uint8_t {
  kNone,       // not usable (see DsaWq::reason)
  kEnqcmd,     // shared WQ, ENQCMD to the mapped portal
  kMovdir64b,  // dedicated WQ, MOVDIR64B to the mapped portal
  kWrite,      // write() of descriptors to the WQ's file: no portal or no instruction (slower;
               // the kernel refuses batch descriptors on this path)
};
TIERFLOW_EXPORT std::string_view DsaSubmitPathName(DsaSubmitPath path);

struct DsaWq {
  std::string name;     // "wq0.0"
  std::string device;   // "dsa0"
  int id = -1;          // the M of wqN.M
  bool shared = true;   // mode: shared or dedicated
  std::string type;     // user | kernel | mdev | none
  std::string state;    // enabled | disabled | ...
  std::string wq_name;  // the name given at configuration (may be empty)
  std::uint32_t size = 0;
  std::uint32_t priority = 0;
  int group_id = -1;
  bool block_on_fault = false;
  std::uint64_t max_transfer_size = 0;
  std::uint32_t max_batch_size = 0;
  std::string cdev_path;  // "/dev/dsa/wq0.0"

  DsaSubmitPath path = DsaSubmitPath::kNone;  // the best way to submit here, as far as files tell
  bool usable() const { return path != DsaSubmitPath::kNone; }
  // Why not usable (and the fix), or why only the slower write() path is; empty otherwise.
  std::string reason;
};

struct DsaDevice {
  std::string name;  // "dsa0"
  int id = -1;
  int numa_node = -1;  // -1 when the firmware gives none
  std::string state;
  std::uint32_t version = 0;
  std::uint64_t max_transfer_size = 0;
  std::uint32_t max_batch_size = 0;
  std::uint32_t max_work_queues_size = 0;
  std::uint32_t max_engines = 0;
  bool pasid_enabled = false;
  std::uint64_t op_cap[4] = {0, 0, 0, 0};  // bit i: opcode i supported
  std::uint64_t gen_cap = 0;
  std::vector<DsaWq> wqs;
  // Empty, or why the device offers nothing to user space as a whole (no WQ configured).
  std::string note;

  bool SupportsOpcode(unsigned opcode) const {
    return opcode < 256 && ((op_cap[opcode / 64] >> (opcode % 64)) & 1) != 0;
  }
};

struct DsaDiscoveryOptions {
  std::string sysfs_root = "/sys";  // tests point this at tests/fixtures/dsa/...
  std::string dev_root = "/dev";    // where dsa/wqN.M character devices appear
  DsaCpuFeatures cpu = DsaCpuFeatures::Detect();
};

class TIERFLOW_EXPORT DsaInventory {
 public:
  // No idxd driver (no <root>/bus/dsa) is not an error: the inventory is empty and note() says
  // so. Unreadable or malformed attributes are errors that name the file.
  static Result<DsaInventory> Discover(const DsaDiscoveryOptions& options = {});

  const std::vector<DsaDevice>& devices() const { return devices_; }
  // Empty, or a sentence on why there are no devices (driver not loaded, ...).
  const std::string& note() const { return note_; }
  const DsaCpuFeatures& cpu() const { return cpu_; }

  // Usable WQs of devices on `node` (all nodes when node < 0), best path first.
  std::vector<const DsaWq*> UsableWqs(int node = -1) const;
  const DsaDevice* FindDevice(const std::string& name) const;

 private:
  std::vector<DsaDevice> devices_;
  std::string note_;
  DsaCpuFeatures cpu_;
};

// Parses an op_cap / gen_cap attribute. Two kernel formats exist: "%*pb" (comma-separated
// 32-bit hex chunks, most significant first, zero-padded) and older "0x..,0x..," 64-bit words,
// least significant first.
TIERFLOW_EXPORT Status ParseDsaCapMask(const std::string& text, std::uint64_t (&bits)[4]);

}  // namespace tierflow
