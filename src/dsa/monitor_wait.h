// SPDX-License-Identifier: Apache-2.0
// Waiting for the device to write a completion record without spinning: UMONITOR the record's
// cache line, then UMWAIT (light C0.2 sleep) until it is written or a TSC deadline passes.
// The kernel caps every UMWAIT at /sys/devices/system/cpu/umwait_control/max_time cycles, so
// long waits are a loop of short ones. Only called where CPUID reports WAITPKG.
#pragma once

#include <cstdint>
#include <string>

namespace tierflow::dsa {

// The kernel's cap on one UMWAIT, in TSC cycles: the file under `sysfs_root`, or 100000 (the
// kernel's default) when the file is missing or unreadable.
std::uint64_t UmwaitMaxCycles(const std::string& sysfs_root = "/sys");

// Waits at most `cycles` TSC cycles (each UMWAIT capped at `max_cycles`) for the byte at
// `status` to become non-zero. Returns whether it did.
bool MonitorWait(const volatile std::uint8_t* status, std::uint64_t cycles,
                 std::uint64_t max_cycles);

namespace internal {
// Replaced by tests to observe what the engine waits on (the instructions need WAITPKG, which
// the build machine may lack). Default: MonitorWait.
extern bool (*monitor_wait)(const volatile std::uint8_t* status, std::uint64_t cycles,
                            std::uint64_t max_cycles);
// CPUID's WAITPKG bit; replaced by tests together with monitor_wait.
extern bool (*cpu_has_waitpkg)();
}  // namespace internal

}  // namespace tierflow::dsa
