/* SPDX-License-Identifier: Apache-2.0 */
/* tierflow's C API: data pipes, engines and handles for C, Fortran (iso_c_binding), Rust and
 * any other language with a C foreign-function interface (docs/c-api.md).
 *
 *   tf_runtime* rt;
 *   tf_locator *in, *buf;
 *   tf_pipe* p;
 *   if (tf_runtime_create(NULL, &rt) != TF_OK) fprintf(stderr, "%s\n", tf_last_error());
 *   tf_locator_parse(rt, "file:/data/input", TF_FILE_READ, 0, &in);
 *   tf_locator_parse(rt, "dram:0:64MiB", TF_FILE_CREATE, 0, &buf);
 *   tf_pipe_connect(rt, in, buf, NULL, &p);
 *   tf_pipe_transfer(p, 0, 0, 64 << 20);
 *   tf_pipe_free(p); tf_locator_free(buf); tf_locator_free(in); tf_runtime_free(rt);
 *
 * Errors. Every call that can fail returns a tf_status: TF_OK (0), or a code saying what kind
 * of failure it was. The message, which names the problem and the fix, is tf_last_error(): the
 * last failure on the calling thread, valid until that thread's next failing call. No call
 * lets a C++ exception out; running out of memory inside one is TF_OUT_OF_MEMORY. A NULL
 * where an object belongs is TF_INVALID_ARGUMENT, never a crash.
 *
 * Objects. tf_runtime, tf_locator, tf_pipe, tf_engine and tf_handle are opaque; each *_create,
 * *_parse, *_connect or *_submit that returns TF_OK hands the caller one that it releases with
 * the matching *_free (NULL is accepted and ignored). A runtime must outlive its locators and
 * pipes; an engine its handles; memory given to a pipe or an operation must stay valid until
 * the transfer or operation completes. Freeing a pipe or a handle waits for what is in flight.
 *
 * Thread-safety: as the C++ API (pipe.h, engine.h): calls on different objects, and on one
 * runtime, pipe or engine, may come from any threads at once; one handle may be tested and
 * waited on from several threads, but freed by one, after the others are done with it.
 *
 * ABI: the symbols are versioned (node TIERFLOW_C_1 of cmake/tierflow.map); structs passed in
 * start with their own size, which *_init sets, so that later versions can add fields. */
#ifndef TIERFLOW_TIERFLOW_C_H_
#define TIERFLOW_TIERFLOW_C_H_

#include <stddef.h>
#include <stdint.h>

/* What the shared library exports (everything else in it is hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define TF_API __attribute__((visibility("default")))
#else
#define TF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---------------------------------------------------------------------------- */

typedef enum tf_status {
  TF_OK = 0,
  TF_INVALID_ARGUMENT = 1, /* the caller passed what the contract forbids */
  TF_NOT_FOUND = 2,        /* a node, tier, engine or file that does not exist */
  TF_OUT_OF_MEMORY = 3,    /* an allocation the system could not satisfy */
  TF_UNSUPPORTED = 4,      /* the hardware or engine cannot do this */
  TF_PENDING = 5,          /* not completed yet (tf_handle_test) */
  TF_CANCELLED = 6,        /* dropped before it ran (its engine shut down) */
  TF_FAILED = 7,           /* ran and failed */
  TF_IO_ERROR = 8,         /* an OS call failed */
  TF_INTERNAL = 9,         /* a broken invariant inside tierflow: please report it */
  TF_AGAIN = 10            /* tf_pipe_try_post: the pipe is full; nothing was started (try
                              again when tf_pipe_fd polls writable: EAGAIN's contract) */
} tf_status;

/* The message of the calling thread's last failure ("" when none has failed yet). */
TF_API const char* tf_last_error(void);
/* The stable lower-case name of a code ("invalid_argument"); "unknown" for other values. */
TF_API const char* tf_status_name(int status);
/* The library's version ("MAJOR.MINOR.PATCH") and the C API's version (1 for TIERFLOW_C_1). */
TF_API const char* tf_version(void);
TF_API int tf_c_api_version(void);

/* ---- the pipe runtime and locators (pipe_runtime.h, locator.h) -------------------------- */

typedef struct tf_runtime tf_runtime;
typedef struct tf_locator tf_locator;

typedef struct tf_runtime_options {
  size_t struct_size;           /* sizeof(tf_runtime_options): tf_runtime_options_init sets it */
  int cpu_workers;              /* CPU engine workers on node 0; 0: one per CPU (default) */
  int use_dsa;                  /* non-zero: a hardware DSA where one is usable (default 1) */
  int dsa_model;                /* non-zero: the DSA's software model where no DSA is (0) */
  int model_placement;          /* memory of nodes this machine lacks stands in on node 0 (0) */
  const char* calibration_path; /* NULL or "": the default calibration file */
  const char* topology_xml;     /* NULL or "": this system; else an hwloc XML to plan for */
} tf_runtime_options;

/* Fills *options with the defaults above. */
TF_API void tf_runtime_options_init(tf_runtime_options* options);
/* options NULL: the defaults. Errors: as PipeRuntime::Create (topology, io_uring, a malformed
 * calibration file); a struct_size this library does not know. */
TF_API tf_status tf_runtime_create(const tf_runtime_options* options, tf_runtime** out);
TF_API void tf_runtime_free(tf_runtime* runtime);

typedef enum tf_file_mode {
  TF_FILE_READ = 0,    /* an existing file, read only */
  TF_FILE_CREATE = 1,  /* a new file; refused if the path exists */
  TF_FILE_REPLACE = 2, /* created, or truncated if it exists (from offset 0 only) */
  TF_FILE_MODIFY = 3   /* an existing file, written in place */
} tf_file_mode;

/* A locator from the command line's spelling: "dram[:NODE[:SIZE]]", "hbm[:NEAR[:SIZE]]",
 * "cxl[:NODE[:SIZE]]", "node:N[:SIZE]", "file:PATH[:OFFSET[:LENGTH]]", "spill:A,B,...",
 * "tiered:SIZE[:DIR]" (an area the runtime places on the fastest tier with room: pipes.md).
 * `mode` says what a file locator may do to its file; `default_size` is the size of memory
 * and the length of a new file that name none (0: one is required). Errors name the part of
 * the spelling that is wrong, a missing file, an existing one that would be overwritten. */
TF_API tf_status tf_locator_parse(tf_runtime* runtime, const char* spec, tf_file_mode mode,
                                  uint64_t default_size, tf_locator** out);
/* Bytes [offset, offset + length) of the file at `path` (length 0: to its end; required when
 * creating or replacing). */
TF_API tf_status tf_locator_file(tf_runtime* runtime, const char* path, uint64_t offset,
                                 uint64_t length, tf_file_mode mode, tf_locator** out);
/* Memory the caller owns (it must outlive every pipe using the locator); node -1: unknown. */
TF_API tf_status tf_locator_borrow(tf_runtime* runtime, void* data, uint64_t size, int node,
                                   tf_locator** out);
TF_API void tf_locator_free(tf_locator* locator);
/* Bytes the locator holds (0 for NULL). */
TF_API uint64_t tf_locator_capacity(const tf_locator* locator);
/* A memory locator's first byte; NULL for files, spill chains and NULL. */
TF_API void* tf_locator_data(const tf_locator* locator);
/* Its name in the command line's spelling ("dram:0:1MiB"); valid while the locator is. */
TF_API const char* tf_locator_name(const tf_locator* locator);

/* ---- pipes (pipe.h) --------------------------------------------------------------------- */

typedef struct tf_pipe tf_pipe;

typedef struct tf_pipe_options {
  size_t struct_size;       /* sizeof(tf_pipe_options): tf_pipe_options_init sets it */
  unsigned queue_depth;     /* chunks in flight; 0: the planner's choice */
  uint64_t chunk_bytes;     /* transfers cut into chunks of this size; 0: the planner's */
  const char* mechanism;    /* NULL: the planner's; else "cpu", "dsa", "io_uring-read", ... */
  uint64_t bandwidth_cap;   /* bytes per second; 0: unlimited */
  int force_staging;        /* non-zero: through DRAM near the destination */
  int in_order_completions; /* non-zero: tf_pipe_reap reports in the order posted */
  int sync_writes;          /* non-zero: fdatasync a file destination after each transfer */
} tf_pipe_options;

TF_API void tf_pipe_options_init(tf_pipe_options* options);
/* Plans a pipe from `from` to `to` (options NULL: the defaults). Errors give the reason when
 * no mechanism can serve the path or an option cannot be honoured. */
TF_API tf_status tf_pipe_connect(tf_runtime* runtime, const tf_locator* from, const tf_locator* to,
                                 const tf_pipe_options* options, tf_pipe** out);
/* Waits for the pipe's transfers in flight, then releases it. */
TF_API void tf_pipe_free(tf_pipe* pipe);

/* Flavour (a): moves [src_offset, +length) of the source to [dst_offset, +length) of the
 * destination and returns when done. Errors: a range beyond a locator, length 0, the
 * transfer's failure (naming the file and offset). */
TF_API tf_status tf_pipe_transfer(tf_pipe* pipe, uint64_t src_offset, uint64_t dst_offset,
                                  uint64_t length);

typedef struct tf_handle tf_handle;
/* Called once when an operation or transfer completes, on the thread that completes it: it
 * must not block, and must not free or wait on its own handle. */
typedef void (*tf_callback)(void* user, tf_status status);

/* Flavour (b): the same, asynchronously; *out completes when the transfer has. callback may be
 * NULL. */
TF_API tf_status tf_pipe_submit(tf_pipe* pipe, uint64_t src_offset, uint64_t dst_offset,
                                uint64_t length, tf_callback callback, void* user, tf_handle** out);

/* Flavour (c), the operating system's style: tf_pipe_post starts a transfer whose completion
 * tf_pipe_reap reports with `tag`, and tf_pipe_fd is a descriptor to poll as a socket's. */
typedef struct tf_completion {
  uint64_t tag;
  tf_status status;
  uint64_t bytes;
  /* The failure's message ("" when ok), valid until the next tf_pipe_reap on this pipe. */
  const char* message;
} tf_completion;

TF_API tf_status tf_pipe_post(tf_pipe* pipe, uint64_t src_offset, uint64_t dst_offset,
                              uint64_t length, uint64_t tag);
/* As tf_pipe_post, but only when the pipe has room: TF_AGAIN, with nothing started, while a
 * chunk waits for a slot of the queue depth (wait for tf_pipe_fd to poll writable). */
TF_API tf_status tf_pipe_try_post(tf_pipe* pipe, uint64_t src_offset, uint64_t dst_offset,
                                  uint64_t length, uint64_t tag);
/* Moves up to `capacity` completions into `out` and returns how many; never blocks. */
TF_API size_t tf_pipe_reap(tf_pipe* pipe, tf_completion* out, size_t capacity);
/* The pipe's readiness descriptor (owned by the pipe; poll it, never read, write or close it):
 * readable while completions wait to be reaped, writable while the pipe has room. -1 for
 * NULL. */
TF_API int tf_pipe_fd(const tf_pipe* pipe);
/* Posted transfers not reaped yet. */
TF_API size_t tf_pipe_posted(const tf_pipe* pipe);
/* Waits for every transfer submitted so far (any flavour); the first error among them since
 * the last drain, or TF_OK. */
TF_API tf_status tf_pipe_drain(tf_pipe* pipe);

/* The plan (tf_pipe_explain) or the pipe's counters (tf_pipe_stats) as JSON, written into
 * buffer as snprintf does: at most `capacity` bytes with the terminating NUL; returns the
 * length the whole text needs (without the NUL), so a call with capacity 0 sizes the buffer. */
TF_API size_t tf_pipe_explain(const tf_pipe* pipe, char* buffer, size_t capacity);
TF_API size_t tf_pipe_stats(const tf_pipe* pipe, char* buffer, size_t capacity);

/* ---- engines and operations (engine.h, operation.h) ------------------------------------- */

typedef struct tf_engine tf_engine;

/* The CPU engine on `node`'s cores: `workers` threads (0: one per core of the node, less one).
 * Errors: a node without CPUs or that does not exist, workers out of 0..4096. */
TF_API tf_status tf_cpu_engine_create(int node, int workers, tf_engine** out);
/* Intel DSA: this machine's usable work queues (model 0; the error names why each is unusable
 * when none is), or the software model of one DSA on `node` (model non-zero). */
TF_API tf_status tf_dsa_engine_create(int model, int node, tf_engine** out);
/* Waits for operations in flight, then releases the engine. */
TF_API void tf_engine_free(tf_engine* engine);
/* The engine's capabilities as JSON ({"name","kind","ops",...,"is_model"}), as
 * tf_pipe_explain writes text. */
TF_API size_t tf_engine_capabilities(const tf_engine* engine, char* buffer, size_t capacity);

typedef enum tf_op_kind {
  TF_OP_COPY = 0,    /* dst <- src; no overlap */
  TF_OP_MOVE = 1,    /* dst <- src; may overlap */
  TF_OP_FILL = 2,    /* dst <- the 8-byte pattern repeated */
  TF_OP_COMPARE = 3, /* src with src2: tf_result's equal and first_difference */
  TF_OP_COMPARE_PATTERN = 4,
  TF_OP_DUALCAST = 5,   /* dst <- src and dst2 <- src */
  TF_OP_CRC32C = 6,     /* CRC-32C of src continuing from crc_seed: tf_result's crc */
  TF_OP_WRITE_BACK = 7, /* cache-line maintenance of dst (coherence.h) */
  TF_OP_INVALIDATE = 8,
  TF_OP_WRITE_BACK_INVALIDATE = 9,
  TF_OP_DRAIN = 10 /* completes once everything submitted before it to the engine has */
} tf_op_kind;

typedef struct tf_operation {
  tf_op_kind kind;
  void* dst;
  void* dst2; /* TF_OP_DUALCAST */
  const void* src;
  const void* src2; /* TF_OP_COMPARE */
  uint64_t size;
  uint64_t pattern;  /* TF_OP_FILL, TF_OP_COMPARE_PATTERN */
  uint32_t crc_seed; /* TF_OP_CRC32C */
} tf_operation;

/* Starts `count` operations as one batch (count 1: one operation); *out completes when all
 * have. callback may be NULL. Errors: what the engine refuses (a kind it does not do,
 * overlapping ranges, NULL buffers, a size over its limit), count 0. */
TF_API tf_status tf_engine_submit(tf_engine* engine, const tf_operation* ops, size_t count,
                                  tf_callback callback, void* user, tf_handle** out);

/* ---- handles (handle.h) ----------------------------------------------------------------- */

typedef struct tf_result {
  tf_status status;
  uint64_t bytes_completed;
  int equal;                 /* compares: non-zero when equal */
  uint64_t first_difference; /* compares: offset of the first difference */
  uint32_t crc;              /* TF_OP_CRC32C */
} tf_result;

/* Waits for completion: the final status (its message in tf_last_error). */
TF_API tf_status tf_handle_wait(tf_handle* handle);
/* Never blocks: TF_PENDING while in flight, else as tf_handle_wait. */
TF_API tf_status tf_handle_test(tf_handle* handle);
/* The outcome (status TF_PENDING while in flight). TF_INVALID_ARGUMENT for NULL. */
TF_API tf_status tf_handle_result(const tf_handle* handle, tf_result* out);
/* Waits for the operation, then releases the handle. */
TF_API void tf_handle_free(tf_handle* handle);

#ifdef __cplusplus
}
#endif

#endif /* TIERFLOW_TIERFLOW_C_H_ */
