// SPDX-License-Identifier: Apache-2.0
// The C API's pipes in their three flavours (tierflow/tierflow_c.h over tierflow/pipe.h).
#include <string>

#include "capi/capi_internal.h"

namespace tierflow::capi {
namespace {

Result<PipeOptions> OptionsOf(const tf_pipe_options* in) {
  PipeOptions o;
  if (in == nullptr) return o;
  if (Status s = CheckStructSize(in->struct_size, sizeof *in, "tf_pipe_options"); !s.ok()) {
    return s;
  }
  o.queue_depth = in->queue_depth;
  o.chunk_bytes = in->chunk_bytes;
  if (in->mechanism != nullptr && in->mechanism[0] != '\0') {
    Result<Mechanism> m = ParseMechanism(in->mechanism);
    if (!m.ok()) return m.status();
    o.mechanism = *m;
  }
  o.bandwidth_cap = in->bandwidth_cap;
  o.force_staging = in->force_staging != 0;
  o.in_order_completions = in->in_order_completions != 0;
  o.sync_writes = in->sync_writes != 0;
  return o;
}

}  // namespace

// The C callback as a CompletionCallback: called once with the completion's code.
CompletionCallback ToCallback(tf_callback callback, void* user) {
  if (callback == nullptr) return {};
  return CompletionCallback(
      [callback, user](const Completion& c) { callback(user, Code(c.status.code())); });
}

}  // namespace tierflow::capi

using namespace tierflow;
using namespace tierflow::capi;

extern "C" {

void tf_pipe_options_init(tf_pipe_options* options) {
  if (options == nullptr) return;
  *options = tf_pipe_options{};
  options->struct_size = sizeof(tf_pipe_options);
}

tf_status tf_pipe_connect(tf_runtime* runtime, const tf_locator* from, const tf_locator* to,
                          const tf_pipe_options* options, tf_pipe** out) {
  return Guarded("tf_pipe_connect", [&] {
    tf_status st;
    if (Missing(runtime, "tf_pipe_connect: runtime", &st) ||
        Missing(from, "tf_pipe_connect: from", &st) || Missing(to, "tf_pipe_connect: to", &st) ||
        MissingOut(out, "tf_pipe_connect", &st)) {
      return st;
    }
    Result<PipeOptions> o = OptionsOf(options);
    if (!o.ok()) return Fail(o.status());
    Result<Pipe> p = runtime->runtime->Connect(from->locator, to->locator, *o);
    if (!p.ok()) return Fail(p.status());
    auto* made = new tf_pipe;
    made->pipe = std::move(*p);
    return Give(made, out);
  });
}

void tf_pipe_free(tf_pipe* pipe) {
  if (pipe == nullptr) return;
  (void)pipe->pipe.Drain();  // the last reference waits too; draining first says so here
  delete pipe;
}

tf_status tf_pipe_transfer(tf_pipe* pipe, uint64_t src_offset, uint64_t dst_offset,
                           uint64_t length) {
  return Guarded("tf_pipe_transfer", [&] {
    tf_status st;
    if (Missing(pipe, "tf_pipe_transfer: pipe", &st)) return st;
    return Fail(pipe->pipe.Transfer(src_offset, dst_offset, length));
  });
}

tf_status tf_pipe_submit(tf_pipe* pipe, uint64_t src_offset, uint64_t dst_offset, uint64_t length,
                         tf_callback callback, void* user, tf_handle** out) {
  return Guarded("tf_pipe_submit", [&] {
    tf_status st;
    if (Missing(pipe, "tf_pipe_submit: pipe", &st) || MissingOut(out, "tf_pipe_submit", &st)) {
      return st;
    }
    // Made first: once the transfer is submitted nothing may fail and lose its handle.
    auto made = std::make_unique<tf_handle>();
    Result<Handle> r =
        pipe->pipe.Submit(src_offset, dst_offset, length, ToCallback(callback, user));
    if (!r.ok()) return Fail(r.status());
    made->handle = std::move(*r);
    return Give(made.release(), out);
  });
}

tf_status tf_pipe_post(tf_pipe* pipe, uint64_t src_offset, uint64_t dst_offset, uint64_t length,
                       uint64_t tag) {
  return Guarded("tf_pipe_post", [&] {
    tf_status st;
    if (Missing(pipe, "tf_pipe_post: pipe", &st)) return st;
    return Fail(pipe->pipe.Post(src_offset, dst_offset, length, tag));
  });
}

tf_status tf_pipe_try_post(tf_pipe* pipe, uint64_t src_offset, uint64_t dst_offset, uint64_t length,
                           uint64_t tag) {
  return Guarded("tf_pipe_try_post", [&] {
    tf_status st;
    if (Missing(pipe, "tf_pipe_try_post: pipe", &st)) return st;
    Result<bool> started = pipe->pipe.TryPost(src_offset, dst_offset, length, tag);
    if (!started.ok()) return Fail(started.status());
    return *started ? TF_OK : TF_AGAIN;
  });
}

size_t tf_pipe_reap(tf_pipe* pipe, tf_completion* out, size_t capacity) {
  if (pipe == nullptr || out == nullptr || capacity == 0) return 0;
  try {
    // Everything allocated before reaping, so that no completion is taken and then lost.
    std::vector<PipeCompletion> got(capacity);
    std::lock_guard lock(pipe->reap_mu);
    pipe->reaped.clear();
    pipe->reaped.reserve(capacity);
    const std::size_t n = pipe->pipe.Reap(got);
    for (std::size_t i = 0; i < n; ++i) {
      pipe->reaped.push_back(std::move(got[i].status));
      const Status& s = pipe->reaped.back();
      out[i] = tf_completion{got[i].tag, Code(s.code()), got[i].bytes, s.message().c_str()};
    }
    return n;
  } catch (...) {  // no memory to hold completions: they stay queued for the next call
    FailStatic(TF_OUT_OF_MEMORY, "tf_pipe_reap: out of memory; completions stay queued");
    return 0;
  }
}

int tf_pipe_fd(const tf_pipe* pipe) { return pipe != nullptr ? pipe->pipe.fd() : -1; }

size_t tf_pipe_posted(const tf_pipe* pipe) { return pipe != nullptr ? pipe->pipe.posted() : 0; }

tf_status tf_pipe_drain(tf_pipe* pipe) {
  return Guarded("tf_pipe_drain", [&] {
    tf_status st;
    if (Missing(pipe, "tf_pipe_drain: pipe", &st)) return st;
    return Fail(pipe->pipe.Drain());
  });
}

size_t tf_pipe_explain(const tf_pipe* pipe, char* buffer, size_t capacity) {
  if (pipe == nullptr) return CopyOut("", buffer, capacity);
  return TextOut(
      "tf_pipe_explain: out of memory", [&] { return pipe->pipe.plan().ToJson(); }, buffer,
      capacity);
}

size_t tf_pipe_stats(const tf_pipe* pipe, char* buffer, size_t capacity) {
  if (pipe == nullptr) return CopyOut("", buffer, capacity);
  return TextOut(
      "tf_pipe_stats: out of memory", [&] { return pipe->pipe.stats().ToJson(); }, buffer,
      capacity);
}

}  // extern "C"
