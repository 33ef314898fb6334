// SPDX-License-Identifier: Apache-2.0
#include "tierflow/dsa_inventory.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tierflow {
namespace fs = std::filesystem;

DsaCpuFeatures DsaCpuFeatures::Detect() {
  DsaCpuFeatures f;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.waitpkg = (c >> 5) & 1;
    f.la57 = (c >> 16) & 1;
    f.movdir64b = (c >> 28) & 1;
    f.enqcmd = (c >> 29) & 1;
  }
#endif
  if (f.la57) {
    // The CPU can do 5-level paging; the kernel uses it unless booted with no5lvl.
    std::ifstream cmdline("/proc/cmdline");
    std::string line;
    std::getline(cmdline, line);
    if (line.find("no5lvl") != std::string::npos) f.la57 = false;
  }
  return f;
}

std::string_view DsaSubmitPathName(DsaSubmitPath path) {
  switch (path) {
    case DsaSubmitPath::kNone:
      return "none";
    case DsaSubmitPath::kEnqcmd:
      return "enqcmd";
    case DsaSubmitPath::kMovdir64b:
      return "movdir64b";
    case DsaSubmitPath::kWrite:
      return "write";
  }
  return "?";
}

Status ParseDsaCapMask(const std::string& text, std::uint64_t (&bits)[4]) {
  for (auto& w : bits) w = 0;
  std::vector<std::string> chunks;
  std::stringstream ss(text);
  for (std::string c; std::getline(ss, c, ',');) {
    c.erase(std::remove_if(c.begin(), c.end(),
                           [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); }),
            c.end());
    if (!c.empty()) chunks.push_back(c);
  }
  if (chunks.empty())
    return Status::InvalidArgument(fmt::format("empty capability mask '{}'", text));
  const bool words64 = chunks[0].rfind("0x", 0) == 0 || chunks[0].rfind("0X", 0) == 0;
  auto parse = [&](std::string c, std::uint64_t& out) -> Status {
    if (c.rfind("0x", 0) == 0 || c.rfind("0X", 0) == 0) c = c.substr(2);
    auto [p, ec] = std::from_chars(c.data(), c.data() + c.size(), out, 16);
    if (ec != std::errc() || p != c.data() + c.size()) {
      return Status::InvalidArgument(
          fmt::format("capability mask '{}': '{}' is not hexadecimal", text, c));
    }
    return Status::Ok();
  };
  if (words64) {  // least significant 64-bit word first
    if (chunks.size() > 4) {
      return Status::InvalidArgument(
          fmt::format("capability mask '{}' has more than 4 words", text));
    }
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      if (Status s = parse(chunks[i], bits[i]); !s.ok()) return s;
    }
    return Status::Ok();
  }
  // %*pb: most significant 32-bit chunk first.
  if (chunks.size() > 8) {
    return Status::InvalidArgument(
        fmt::format("capability mask '{}' has more than 256 bits", text));
  }
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    std::uint64_t v = 0;
    if (Status s = parse(chunks[i], v); !s.ok()) return s;
    if (v > 0xffffffffu) {
      return Status::InvalidArgument(
          fmt::format("capability mask '{}': chunk '{}' exceeds 32 bits", text, chunks[i]));
    }
    std::size_t chunk_index = chunks.size() - 1 - i;  // 0 = least significant
    bits[chunk_index / 2] |= v << (32 * (chunk_index % 2));
  }
  return Status::Ok();
}

namespace {

// One sysfs directory's attributes.
class Attrs {
 public:
  explicit Attrs(fs::path dir) : dir_(std::move(dir)) {}

  bool Has(const char* name) const { return fs::exists(dir_ / name); }

  Result<std::string> Text(const char* name) const {
    fs::path p = dir_ / name;
    std::ifstream in(p);
    if (!in) {
      return Status::IoError(
          fmt::format("cannot read {}: {}", p.string(),
                      fs::exists(p) ? "permission denied or not a file" : "no such file"));
    }
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
  }
  // Optional text: `fallback` when the file is missing (older kernels lack some attributes).
  Result<std::string> Text(const char* name, const std::string& fallback) const {
    return Has(name) ? Text(name) : Result<std::string>(fallback);
  }

  template <typename T>
  Status Number(const char* name, T& out, bool required = false) const {
    if (!Has(name)) {
      return required ? Status::NotFound(fmt::format("{} is missing", (dir_ / name).string()))
                      : Status::Ok();
    }
    Result<std::string> t = Text(name);
    if (!t.ok()) return t.status();
    std::string s = *t;
    int base = 10;
    if (s.rfind("0x", 0) == 0) {
      s = s.substr(2);
      base = 16;
    }
    long long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc() || p != s.data() + s.size()) {
      return Status::InvalidArgument(
          fmt::format("{} holds '{}', not a number", (dir_ / name).string(), *t));
    }
    if (!std::in_range<T>(v)) {
      return Status::InvalidArgument(
          fmt::format("{} holds {}, outside {}..{}", (dir_ / name).string(), v,
                      std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
    }
    out = static_cast<T>(v);
    return Status::Ok();
  }

 private:
  fs::path dir_;
};

#define TF_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    if (Status s_ = (expr); !s_.ok()) return s_; \
  } while (0)

Status ReadWq(const fs::path& dir, const DsaDevice& dev, DsaWq& wq) {
  Attrs a(dir);
  Result<std::string> mode = a.Text("mode");
  if (!mode.ok()) return mode.status();
  if (*mode != "shared" && *mode != "dedicated") {
    return Status::InvalidArgument(
        fmt::format("{}/mode is '{}': expected shared or dedicated", dir.string(), *mode));
  }
  wq.shared = *mode == "shared";
  Result<std::string> type = a.Text("type", "user");
  if (!type.ok()) return type.status();
  wq.type = *type;
  Result<std::string> state = a.Text("state");
  if (!state.ok()) return state.status();
  wq.state = *state;
  Result<std::string> name = a.Text("name", "");
  if (!name.ok()) return name.status();
  wq.wq_name = *name;
  TF_RETURN_IF_ERROR(a.Number("size", wq.size, /*required=*/true));
  TF_RETURN_IF_ERROR(a.Number("priority", wq.priority));
  TF_RETURN_IF_ERROR(a.Number("group_id", wq.group_id));
  int bof = 0;
  TF_RETURN_IF_ERROR(a.Number("block_on_fault", bof));
  wq.block_on_fault = bof != 0;
  wq.max_transfer_size = dev.max_transfer_size;
  wq.max_batch_size = dev.max_batch_size;
  TF_RETURN_IF_ERROR(a.Number("max_transfer_size", wq.max_transfer_size));
  TF_RETURN_IF_ERROR(a.Number("max_batch_size", wq.max_batch_size));
  return Status::Ok();
}

// Decides how (and whether) user space can submit to `wq`; fills path and reason.
void Judge(const DsaDevice& dev, DsaWq& wq, const DsaCpuFeatures& cpu) {
  const std::string where = fmt::format("{}/{}", dev.name, wq.name);
  auto no = [&](std::string why) {
    wq.path = DsaSubmitPath::kNone;
    wq.reason = std::move(why);
  };
  if (dev.state != "enabled") {
    return no(fmt::format("device {} is {}: enable it with 'accel-config enable-device {}'",
                          dev.name, dev.state, dev.name));
  }
  if (wq.type != "user") {
    return no(fmt::format(
        "{} has type '{}' (owned by the kernel), so user space cannot submit to it: reconfigure "
        "it with 'accel-config disable-wq {w}; accel-config config-wq --type=user --name=tierflow "
        "{w}; accel-config enable-wq {w}'",
        wq.name, wq.type, fmt::arg("w", where)));
  }
  if (wq.state != "enabled") {
    return no(fmt::format("{} is {}: enable it with 'accel-config enable-wq {}'", wq.name, wq.state,
                          where));
  }
  if (wq.size == 0) {
    return no(
        fmt::format("{} has size 0: give it entries with 'accel-config config-wq "
                    "--wq-size=16 {}' while it is disabled",
                    wq.name, where));
  }
  if (!dev.pasid_enabled) {
    std::string why = fmt::format(
        "{} has PASID (shared virtual addressing) disabled, which user-space submission needs: "
        "boot with 'intel_iommu=on,sm_on' and check that the IOMMU supports scalable mode",
        dev.name);
    if (cpu.la57) {
      why +=
          "; 5-level paging is active and IOMMUs without 5-level support make the kernel turn "
          "SVA off: boot with 'no5lvl' to try that";
    }
    return no(why);
  }
  if (!fs::exists(wq.cdev_path)) {
    return no(
        fmt::format("{} does not exist although {} is enabled: the WQ is not bound to the "
                    "idxd user driver (accel-config enable-wq {}; modprobe idxd)",
                    wq.cdev_path, wq.name, where));
  }
  // Shared WQs take ENQCMD, dedicated ones MOVDIR64B; without it the kernel submits for us.
  const bool has_instruction = wq.shared ? cpu.enqcmd : cpu.movdir64b;
  if (has_instruction) {
    wq.path = wq.shared ? DsaSubmitPath::kEnqcmd : DsaSubmitPath::kMovdir64b;
  } else {
    wq.path = DsaSubmitPath::kWrite;
    wq.reason = fmt::format(
        "this CPU lacks {}, so descriptors go through write() on the WQ file "
        "(a system call each; batch descriptors are refused there)",
        wq.shared ? "ENQCMD" : "MOVDIR64B");
  }
}

// Whether `s` is prefix + number (+ "." + number with `b`), and the numbers; an entry whose
// numbers do not fit an int is named in `bad` instead.
bool ParseName(const std::string& s, const char* prefix, int& a, int* b, std::string& bad) {
  std::regex re = b == nullptr ? std::regex(std::string("^") + prefix + "([0-9]+)$")
                               : std::regex(std::string("^") + prefix + "([0-9]+)\\.([0-9]+)$");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  const auto number = [](const std::string& digits, int& out) {
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc() && p == digits.data() + digits.size();
  };
  if (!number(m[1], a) || (b != nullptr && !number(m[2], *b))) {
    bad = fmt::format(
        "{}: its number is out of range, so it is no device or work queue the "
        "driver makes (ignored)",
        s);
    return false;
  }
  return true;
}

// The device's own attributes. Errors name the file and what it holds.
Status ReadDevice(const fs::path& dir, DsaDevice& d) {
  Attrs a(dir);
  Result<std::string> state = a.Text("state");
  if (!state.ok()) return state.status();
  d.state = *state;
  TF_RETURN_IF_ERROR(a.Number("numa_node", d.numa_node));
  TF_RETURN_IF_ERROR(a.Number("version", d.version));
  TF_RETURN_IF_ERROR(a.Number("max_transfer_size", d.max_transfer_size));
  TF_RETURN_IF_ERROR(a.Number("max_batch_size", d.max_batch_size));
  TF_RETURN_IF_ERROR(a.Number("max_work_queues_size", d.max_work_queues_size));
  TF_RETURN_IF_ERROR(a.Number("max_engines", d.max_engines));
  int pasid = 0;
  TF_RETURN_IF_ERROR(a.Number("pasid_enabled", pasid));
  d.pasid_enabled = pasid != 0;
  if (a.Has("op_cap")) {
    Result<std::string> t = a.Text("op_cap");
    if (!t.ok()) return t.status();
    if (Status s = ParseDsaCapMask(*t, d.op_cap); !s.ok()) {
      return Status::InvalidArgument(fmt::format("{}/op_cap: {}", dir.string(), s.message()));
    }
  }
  TF_RETURN_IF_ERROR(a.Number("gen_cap", d.gen_cap));
  return Status::Ok();
}

}  // namespace

Result<DsaInventory> DsaInventory::Discover(const DsaDiscoveryOptions& options) {
  DsaInventory inv;
  inv.cpu_ = options.cpu;
  fs::path bus = fs::path(options.sysfs_root) / "bus" / "dsa" / "devices";
  std::error_code ec;
  if (!fs::is_directory(bus, ec)) {
    inv.note_ = fmt::format(
        "no DSA: {} does not exist (no Intel DSA on this machine, or the idxd "
        "driver is not loaded: modprobe idxd)",
        bus.string());
    return inv;
  }
  std::vector<std::pair<int, fs::path>> devs;
  std::vector<std::tuple<int, int, fs::path>> wqs;
  std::vector<std::string> ignored;
  for (const fs::directory_entry& e : fs::directory_iterator(bus, ec)) {
    std::string n = e.path().filename().string();
    int a = 0, b = 0;
    std::string bad;
    if (ParseName(n, "dsa", a, nullptr, bad))
      devs.emplace_back(a, e.path());
    else if (ParseName(n, "wq", a, &b, bad))
      wqs.emplace_back(a, b, e.path());
    if (!bad.empty()) ignored.push_back(bus.string() + "/" + bad);
  }
  if (ec) return Status::IoError(fmt::format("cannot list {}: {}", bus.string(), ec.message()));
  std::sort(devs.begin(), devs.end());
  std::sort(wqs.begin(), wqs.end());
  for (auto& [id, dir] : devs) {
    DsaDevice d;
    d.id = id;
    d.name = fmt::format("dsa{}", id);
    // A device whose attributes cannot be read is listed, unusable, with what is wrong.
    const Status device = ReadDevice(dir, d);
    for (auto& [dev_id, wq_id, wq_dir] : wqs) {
      if (dev_id != id) continue;
      DsaWq wq;
      wq.id = wq_id;
      wq.device = d.name;
      wq.name = fmt::format("wq{}.{}", dev_id, wq_id);
      wq.cdev_path = (fs::path(options.dev_root) / "dsa" / wq.name).string();
      Status read = device.ok() ? ReadWq(wq_dir, d, wq) : device;
      if (read.ok()) Judge(d, wq, options.cpu);
      if (!read.ok()) {  // a bad entry: shown as unusable, with what is wrong in it
        wq.path = DsaSubmitPath::kNone;
        wq.reason = read.message();
      }
      d.wqs.push_back(std::move(wq));
    }
    if (d.wqs.empty()) {
      d.note = fmt::format(
          "{} has no work queue configured: create one with 'accel-config "
          "config-wq --group-id=0 --mode=shared --type=user --name=tierflow "
          "--wq-size=128 --priority=10 {}/wq{}.0', give the group an engine "
          "(config-engine {}/engine{}.0 --group-id=0) and enable both",
          d.name, d.name, id, d.name, id);
    }
    if (!device.ok()) d.note = device.message() + ": the device is not used";
    inv.devices_.push_back(std::move(d));
  }
  if (inv.devices_.empty()) {
    inv.note_ = fmt::format("no DSA devices under {} (the idxd driver is loaded but found none)",
                            bus.string());
  }
  for (const std::string& line : ignored) inv.note_ += (inv.note_.empty() ? "" : "; ") + line;
  return inv;
}

std::vector<const DsaWq*> DsaInventory::UsableWqs(int node) const {
  std::vector<const DsaWq*> out;
  for (const DsaDevice& d : devices_) {
    if (node >= 0 && d.numa_node != node) continue;
    for (const DsaWq& w : d.wqs) {
      if (w.usable()) out.push_back(&w);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const DsaWq* a, const DsaWq* b) {
    return (a->path == DsaSubmitPath::kWrite) < (b->path == DsaSubmitPath::kWrite);
  });
  return out;
}

const DsaDevice* DsaInventory::FindDevice(const std::string& name) const {
  for (const DsaDevice& d : devices_) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

}  // namespace tierflow
