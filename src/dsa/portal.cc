// SPDX-License-Identifier: Apache-2.0
#include "dsa/portal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

namespace tierflow::dsa {

// In portal_x86.cc, compiled with -menqcmd -mmovdir64b (called only after CPUID said yes).
bool Enqcmd(void* portal, const void* desc);  // false: the WQ answered "retry"
void Movdir64b(void* portal, const void* desc);
void StoreFence();

namespace {

class ModelPortalImpl final : public Portal {
 public:
  ModelPortalImpl(std::shared_ptr<DsaDeviceModel> m, int wq)
      : model_(std::move(m)), wq_(wq), shared_(model_->config().wqs.at(wq).shared) {}
  Offer Submit(const dsa_hw_desc& d) override {
    return model_->Enqueue(wq_, &d) == DsaEnqueueResult::kAccepted ? Offer::kAccepted
                                                                   : Offer::kRetry;
  }
  bool shared() const override { return shared_; }
  bool accepts_batches() const override { return true; }
  DsaSubmitPath path() const override {
    return shared_ ? DsaSubmitPath::kEnqcmd : DsaSubmitPath::kMovdir64b;
  }
  std::string last_error() const override { return error_; }  // the model never fails

 private:
  std::shared_ptr<DsaDeviceModel> model_;
  int wq_;
  bool shared_;
  std::string error_;
};

class HardwarePortal final : public Portal {
 public:
  HardwarePortal(int fd, void* page, DsaSubmitPath path, bool shared)
      : fd_(fd), page_(static_cast<char*>(page)), path_(path), shared_(shared) {}
  ~HardwarePortal() override {
    if (page_ != nullptr) munmap(page_, kPortalBytes);
    close(fd_);
  }
  Offer Submit(const dsa_hw_desc& d) override {
    switch (path_) {
      case DsaSubmitPath::kEnqcmd: {
        StoreFence();  // the descriptor's data and record must be visible to the device
        return Enqcmd(page_ + NextOffset(), &d) ? Offer::kAccepted : Offer::kRetry;
      }
      case DsaSubmitPath::kMovdir64b:
        StoreFence();
        Movdir64b(page_ + NextOffset(), &d);
        return Offer::kAccepted;
      case DsaSubmitPath::kWrite: {
        ssize_t n = write(fd_, &d, sizeof d);
        if (n == static_cast<ssize_t>(sizeof d)) return Offer::kAccepted;
        if (n < 0 && (errno == EAGAIN || errno == EBUSY)) return Offer::kRetry;
        SetError(fmt::format("write() of a descriptor to the WQ file failed: {}",
                             n < 0 ? std::strerror(errno) : "short write"));
        return Offer::kFailed;
      }
      case DsaSubmitPath::kNone:
        break;
    }
    SetError("no submission path");
    return Offer::kFailed;
  }
  bool shared() const override { return shared_; }
  bool accepts_batches() const override { return path_ != DsaSubmitPath::kWrite; }
  DsaSubmitPath path() const override { return path_; }
  std::string last_error() const override {
    std::lock_guard lock(error_mu_);
    return error_;
  }

 private:
  static constexpr std::size_t kPortalBytes = 4096;
  // Each submission goes to the next 64 bytes of the portal page, as DML and SPDK do; threads
  // submit concurrently, so the offset is taken atomically.
  std::size_t NextOffset() {
    return offset_.fetch_add(64, std::memory_order_relaxed) & (kPortalBytes - 1);
  }
  void SetError(std::string e) {
    std::lock_guard lock(error_mu_);
    error_ = std::move(e);
  }
  int fd_;
  char* page_;
  DsaSubmitPath path_;
  bool shared_;
  std::atomic<std::size_t> offset_{0};
  mutable std::mutex error_mu_;
  std::string error_;
};

}  // namespace

std::unique_ptr<Portal> ModelPortal(std::shared_ptr<DsaDeviceModel> model, int wq) {
  return std::make_unique<ModelPortalImpl>(std::move(model), wq);
}

Result<std::unique_ptr<Portal>> OpenHardwarePortal(const DsaWq& wq, const DsaCpuFeatures& cpu) {
  if (!wq.usable()) {
    return Status::Unsupported(
        fmt::format("{}/{} is not usable: {}", wq.device, wq.name, wq.reason));
  }
  int fd = open(wq.cdev_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return Status::IoError(fmt::format(
        "cannot open {}: {}{}", wq.cdev_path, std::strerror(e),
        e == EACCES || e == EPERM
            ? " (run as root, or give your user access to the WQ device with a udev rule / chgrp)"
        : e == ENODEV || e == ENXIO
            ? " (the WQ is not enabled for user space: accel-config enable-wq)"
            : ""));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) {
    close(fd);
    return Status::Unsupported(fmt::format(
        "{} is not a character device (a copied sysfs/dev tree?): only the idxd driver's WQ "
        "devices can take descriptors",
        wq.cdev_path));
  }
  DsaSubmitPath path = wq.path;
  void* page = nullptr;
  if (path != DsaSubmitPath::kWrite) {
    page = mmap(nullptr, 4096, PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (page == MAP_FAILED) {
      page = nullptr;
      if (errno != EPERM) {
        int e = errno;
        close(fd);
        return Status::IoError(
            fmt::format("cannot map the portal of {}: {}", wq.cdev_path, std::strerror(e)));
      }
      // Kernels refuse DSA 1.0 portals to processes without CAP_SYS_RAWIO (INTEL-SA-01084):
      // the kernel submits written descriptors for us instead (slower, no batches).
      path = DsaSubmitPath::kWrite;
    }
  }
  (void)cpu;  // wq.path already accounts for the CPU's instructions
  auto portal = std::make_unique<HardwarePortal>(fd, page, path, wq.shared);
  if (path != wq.path) {
    portal->note =
        "mmap of the portal was refused (EPERM: the kernel requires CAP_SYS_RAWIO "
        "for DSA 1.0 portals, INTEL-SA-01084), so descriptors go through write(); "
        "grant CAP_SYS_RAWIO for direct submission";
  } else if (path == DsaSubmitPath::kWrite) {
    portal->note = wq.reason;
  }
  return std::unique_ptr<Portal>(std::move(portal));
}

}  // namespace tierflow::dsa
