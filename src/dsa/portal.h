// SPDX-License-Identifier: Apache-2.0
// The one step that differs between a real DSA and the model: handing a descriptor over.
#pragma once

#include <memory>
#include <string>

#include "dsa/descriptor.h"
#include "tierflow/dsa_inventory.h"
#include "tierflow/dsa_model.h"

namespace tierflow::dsa {

enum class Offer : std::uint8_t {
  kAccepted,
  kRetry,   // shared WQ full (ENQCMD said retry, write() said EAGAIN)
  kFailed,  // the OS refused the submission (see Portal::last_error)
};

class Portal {
 public:
  virtual ~Portal() = default;
  virtual Offer Submit(const dsa_hw_desc& d) = 0;
  virtual bool shared() const = 0;
  virtual bool accepts_batches() const = 0;
  virtual DsaSubmitPath path() const = 0;
  // Why the last kFailed happened (submissions come from many threads: a copy, under a lock).
  virtual std::string last_error() const = 0;

  // Why the path is what it is, when it is not the WQ's natural one (empty otherwise).
  std::string note;
};

// A work queue's portal on this machine: ENQCMD or MOVDIR64B to the mapped page, or write()
// to the WQ file when mapping is refused or the CPU lacks the instruction.
Result<std::unique_ptr<Portal>> OpenHardwarePortal(const DsaWq& wq, const DsaCpuFeatures& cpu);

std::unique_ptr<Portal> ModelPortal(std::shared_ptr<DsaDeviceModel> model, int wq);

}  // namespace tierflow::dsa
