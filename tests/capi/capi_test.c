/* SPDX-License-Identifier: Apache-2.0 */
/* The C API from C (tierflow/tierflow_c.h): pipes in the three flavours between memory and
 * files, engines and handles, and every bad input answered with a code and a message that
 * names the problem. A C program: compiled as C11, linked against the shared library.
 * Usage: capi_c_test (exit status 0 when every check holds; each failure printed). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp in strict C11 (cc -std=c11) */
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierflow/tierflow_c.h"

static int failures = 0;

#define CHECK(cond)                                                                           \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond, \
              tf_last_error());                                                               \
      ++failures;                                                                             \
    }                                                                                         \
  } while (0)

/* status is `code` and the thread's message contains `text`. */
#define CHECK_FAILS(call, code, text)                                                          \
  do {                                                                                         \
    tf_status st_ = (call);                                                                    \
    if (st_ != (code) || strstr(tf_last_error(), (text)) == NULL) {                            \
      fprintf(stderr, "%s:%d: %s gave %s (%s), expected %s with \"%s\"\n", __FILE__, __LINE__, \
              #call, tf_status_name(st_), tf_last_error(), tf_status_name(code), text);        \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

enum { kSize = 1 << 20 };

static void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(i * 131 + seed);
}

static atomic_int callbacks;
static atomic_int callback_status;
static void on_done(void* user, tf_status status) {
  atomic_fetch_add(&callbacks, 1);
  atomic_store(&callback_status, (int)status);
  *(int*)user = 1;
}

static void test_errors_and_version(void) {
  CHECK(strcmp(tf_status_name(TF_OK), "ok") == 0);
  CHECK(strcmp(tf_status_name(TF_INVALID_ARGUMENT), "invalid_argument") == 0);
  CHECK(strcmp(tf_status_name(TF_IO_ERROR), "io_error") == 0);
  CHECK(strcmp(tf_status_name(TF_AGAIN), "again") == 0);
  CHECK(strcmp(tf_status_name(99), "unknown") == 0 && strcmp(tf_status_name(-1), "unknown") == 0);
  CHECK(strlen(tf_version()) >= 5 && tf_c_api_version() == 1);
}

/* Flavours (a), (b) and (c) between two memory locators. */
static void test_memory_pipes(tf_runtime* rt) {
  tf_locator *a = NULL, *b = NULL;
  tf_pipe* p = NULL;
  CHECK(tf_locator_parse(rt, "dram:0:1MiB", TF_FILE_CREATE, 0, &a) == TF_OK);
  CHECK(tf_locator_parse(rt, "dram:0", TF_FILE_CREATE, kSize, &b) == TF_OK);
  CHECK(tf_locator_capacity(a) == kSize && tf_locator_capacity(b) == kSize);
  CHECK(strcmp(tf_locator_name(a), "dram:0:1MiB") == 0);
  unsigned char* src = tf_locator_data(a);
  unsigned char* dst = tf_locator_data(b);
  fill(src, kSize, 7);
  CHECK(tf_pipe_connect(rt, a, b, NULL, &p) == TF_OK);
  CHECK(tf_pipe_transfer(p, 0, 0, kSize) == TF_OK);
  CHECK(memcmp(src, dst, kSize) == 0);

  int flag = 0;
  tf_handle* h = NULL;
  fill(src, kSize, 9);
  CHECK(tf_pipe_submit(p, 0, 0, kSize, on_done, &flag, &h) == TF_OK);
  CHECK(tf_handle_wait(h) == TF_OK);
  tf_handle_free(h);
  CHECK(tf_pipe_drain(p) == TF_OK); /* the callback has run once drain returns */
  CHECK(atomic_load(&callbacks) == 1 && flag == 1 && atomic_load(&callback_status) == TF_OK);
  CHECK(memcmp(src, dst, kSize) == 0);

  fill(src, kSize, 11);
  enum { kPosts = 16 };
  for (int i = 0; i < kPosts; ++i) {
    CHECK(tf_pipe_post(p, (uint64_t)i * (kSize / kPosts), (uint64_t)i * (kSize / kPosts),
                       kSize / kPosts, 100 + i) == TF_OK);
  }
  unsigned seen = 0;
  for (int got = 0; got < kPosts;) {
    struct pollfd pfd = {tf_pipe_fd(p), POLLIN, 0};
    if (poll(&pfd, 1, 10000) < 0) continue; /* EINTR: retry, as pipe.h says */
    tf_completion c[4];
    size_t n = tf_pipe_reap(p, c, 4);
    for (size_t i = 0; i < n; ++i) {
      CHECK(c[i].status == TF_OK && c[i].bytes == kSize / kPosts && c[i].message[0] == '\0');
      CHECK(c[i].tag >= 100 && c[i].tag < 100 + kPosts);
      seen |= 1u << (c[i].tag - 100);
    }
    got += (int)n;
  }
  CHECK(seen == (1u << kPosts) - 1 && tf_pipe_posted(p) == 0);
  CHECK(memcmp(src, dst, kSize) == 0);

  size_t need = tf_pipe_explain(p, NULL, 0);
  char* text = malloc(need + 1);
  CHECK(tf_pipe_explain(p, text, need + 1) == need && strstr(text, "\"hops\"") != NULL);
  char small[8];
  CHECK(tf_pipe_explain(p, small, sizeof small) == need && strlen(small) == 7);
  free(text);
  char stats[1024];
  CHECK(tf_pipe_stats(p, stats, sizeof stats) > 0 && strstr(stats, "\"transfers\"") != NULL);

  CHECK_FAILS(tf_pipe_transfer(p, 0, 1, kSize), TF_INVALID_ARGUMENT, ""); /* beyond b */
  tf_pipe_free(p);
  tf_locator_free(b);
  tf_locator_free(a);
}

/* A file written through one pipe and read back through another; a borrowed C array. */
static void test_files(tf_runtime* rt, const char* dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/out.bin", dir);
  static unsigned char mine[kSize], back[kSize];
  fill(mine, kSize, 3);
  tf_locator *mem = NULL, *file = NULL, *again = NULL, *into = NULL;
  tf_pipe *w = NULL, *r = NULL;
  CHECK(tf_locator_borrow(rt, mine, kSize, -1, &mem) == TF_OK);
  CHECK(tf_locator_file(rt, path, 0, kSize, TF_FILE_CREATE, &file) == TF_OK);
  tf_pipe_options o;
  tf_pipe_options_init(&o);
  o.sync_writes = 1;
  CHECK(tf_pipe_connect(rt, mem, file, &o, &w) == TF_OK);
  CHECK(tf_pipe_transfer(w, 0, 0, kSize) == TF_OK);
  tf_pipe_free(w);
  CHECK(tf_locator_file(rt, path, 0, 0, TF_FILE_READ, &again) == TF_OK);
  CHECK(tf_locator_capacity(again) == kSize && tf_locator_data(again) == NULL);
  CHECK(tf_locator_borrow(rt, back, kSize, -1, &into) == TF_OK);
  CHECK(tf_pipe_connect(rt, again, into, NULL, &r) == TF_OK);
  CHECK(tf_pipe_transfer(r, 0, 0, kSize) == TF_OK);
  CHECK(memcmp(mine, back, kSize) == 0);
  tf_pipe_free(r);
  tf_locator* dup = NULL;
  CHECK_FAILS(tf_locator_file(rt, path, 0, kSize, TF_FILE_CREATE, &dup), TF_INVALID_ARGUMENT,
              "exists");
  CHECK(dup == NULL);
  CHECK_FAILS(tf_locator_parse(rt, "file:/nonexistent/x", TF_FILE_READ, 0, &dup), TF_NOT_FOUND,
              "/nonexistent/x");
  tf_locator_free(into);
  tf_locator_free(again);
  tf_locator_free(file);
  tf_locator_free(mem);
  unlink(path);
}

static void test_engines(void) {
  tf_engine* e = NULL;
  CHECK(tf_cpu_engine_create(0, 1, &e) == TF_OK);
  static unsigned char a[kSize], b[kSize];
  fill(a, kSize, 5);
  tf_operation copy = {.kind = TF_OP_COPY, .dst = b, .src = a, .size = kSize};
  tf_handle* h = NULL;
  CHECK(tf_engine_submit(e, &copy, 1, NULL, NULL, &h) == TF_OK);
  CHECK(tf_handle_wait(h) == TF_OK && tf_handle_test(h) == TF_OK);
  tf_handle_free(h);
  CHECK(memcmp(a, b, kSize) == 0);
  b[777] ^= 1;
  tf_operation two[2] = {{.kind = TF_OP_COMPARE, .src = a, .src2 = b, .size = kSize},
                         {.kind = TF_OP_CRC32C, .src = a, .size = kSize}};
  CHECK(tf_engine_submit(e, &two[0], 1, NULL, NULL, &h) == TF_OK);
  tf_result r;
  CHECK(tf_handle_wait(h) == TF_OK && tf_handle_result(h, &r) == TF_OK);
  CHECK(r.status == TF_OK && !r.equal && r.first_difference == 777);
  tf_handle_free(h);
  CHECK(tf_engine_submit(e, two, 2, NULL, NULL, &h) == TF_OK); /* a batch */
  CHECK(tf_handle_wait(h) == TF_OK);
  tf_handle_free(h);
  tf_operation crc = {.kind = TF_OP_CRC32C, .src = "123456789", .size = 9};
  CHECK(tf_engine_submit(e, &crc, 1, NULL, NULL, &h) == TF_OK);
  CHECK(tf_handle_wait(h) == TF_OK && tf_handle_result(h, &r) == TF_OK);
  CHECK(r.crc == 0xE3069283u); /* CRC-32C's check value */
  tf_handle_free(h);

  tf_operation bad = {.kind = (tf_op_kind)42, .dst = b, .src = a, .size = 8};
  CHECK_FAILS(tf_engine_submit(e, &bad, 1, NULL, NULL, &h), TF_INVALID_ARGUMENT, "TF_OP_");
  tf_operation overlap = {.kind = TF_OP_COPY, .dst = a + 8, .src = a, .size = 64};
  CHECK_FAILS(tf_engine_submit(e, &overlap, 1, NULL, NULL, &h), TF_INVALID_ARGUMENT, "overlap");
  CHECK_FAILS(tf_engine_submit(e, &copy, 0, NULL, NULL, &h), TF_INVALID_ARGUMENT, "count is 0");
  CHECK_FAILS(tf_cpu_engine_create(4095, 1, &e), TF_NOT_FOUND, "4095");
  char caps[512];
  CHECK(tf_engine_capabilities(e, caps, sizeof caps) > 0 && strstr(caps, "\"kind\"") != NULL);
  tf_engine_free(e);

  tf_engine* model = NULL;
  CHECK(tf_dsa_engine_create(1, 0, &model) == TF_OK);
  CHECK(tf_engine_capabilities(model, caps, sizeof caps) > 0 &&
        strstr(caps, "\"is_model\":true") != NULL);
  memset(b, 0, kSize);
  CHECK(tf_engine_submit(model, &copy, 1, NULL, NULL, &h) == TF_OK);
  CHECK(tf_handle_wait(h) == TF_OK && memcmp(a, b, kSize) == 0);
  tf_handle_free(h);
  tf_engine_free(model);
}

/* Readiness: the descriptor is writable while there is room; tf_pipe_try_post says TF_AGAIN
 * when there is none, and an epoll-style loop moves everything. */
static void test_readiness(tf_runtime* rt) {
  tf_locator *a = NULL, *b = NULL;
  tf_pipe* p = NULL;
  CHECK(tf_locator_parse(rt, "dram:0:1MiB", TF_FILE_CREATE, 0, &a) == TF_OK);
  CHECK(tf_locator_parse(rt, "dram:0:1MiB", TF_FILE_CREATE, 0, &b) == TF_OK);
  fill(tf_locator_data(a), kSize, 13);
  tf_pipe_options o;
  tf_pipe_options_init(&o);
  o.queue_depth = 1;
  o.chunk_bytes = 64 << 10;
  o.bandwidth_cap = 16 << 20; /* 1 MiB takes about 60 ms: its chunks wait */
  CHECK(tf_pipe_connect(rt, a, b, &o, &p) == TF_OK);
  struct pollfd pfd = {tf_pipe_fd(p), POLLIN | POLLOUT, 0};
  CHECK(poll(&pfd, 1, 0) == 1 && pfd.revents == POLLOUT);
  CHECK(tf_pipe_try_post(p, 0, 0, kSize, 1) == TF_OK);
  CHECK(tf_pipe_try_post(p, 0, 0, 4096, 2) == TF_AGAIN);
  CHECK(poll(&pfd, 1, 0) == 0);
  size_t got = 0;
  tf_completion c;
  while (got == 0) {
    struct pollfd in = {tf_pipe_fd(p), POLLIN, 0};
    if (poll(&in, 1, 10000) == 1) got = tf_pipe_reap(p, &c, 1);
  }
  CHECK(c.tag == 1 && c.status == TF_OK && c.bytes == kSize);
  CHECK(memcmp(tf_locator_data(a), tf_locator_data(b), kSize) == 0);
  CHECK_FAILS(tf_pipe_try_post(p, 0, 0, 0, 3), TF_INVALID_ARGUMENT, "");
  CHECK_FAILS(tf_pipe_try_post(NULL, 0, 0, 1, 3), TF_INVALID_ARGUMENT, "pipe is NULL");
  tf_pipe_free(p);
  tf_locator_free(b);
  tf_locator_free(a);
}

static void test_bad_inputs(tf_runtime* rt) {
  tf_runtime* none = NULL;
  tf_locator* l = NULL;
  tf_pipe* p = NULL;
  CHECK_FAILS(tf_runtime_create(NULL, NULL), TF_INVALID_ARGUMENT, "out is NULL");
  tf_runtime_options ro;
  tf_runtime_options_init(&ro);
  ro.struct_size = 3;
  CHECK_FAILS(tf_runtime_create(&ro, &none), TF_INVALID_ARGUMENT, "tf_runtime_options_init");
  CHECK(none == NULL);
  CHECK_FAILS(tf_locator_parse(NULL, "dram:0:1MiB", TF_FILE_CREATE, 0, &l), TF_INVALID_ARGUMENT,
              "runtime is NULL");
  CHECK_FAILS(tf_locator_parse(rt, NULL, TF_FILE_CREATE, 0, &l), TF_INVALID_ARGUMENT,
              "spec is NULL");
  CHECK_FAILS(tf_locator_parse(rt, "dram:0:1MiB", (tf_file_mode)9, 0, &l), TF_INVALID_ARGUMENT,
              "TF_FILE_READ");
  CHECK_FAILS(tf_locator_parse(rt, "tape:0", TF_FILE_READ, 0, &l), TF_INVALID_ARGUMENT, "tape");
  CHECK_FAILS(tf_locator_borrow(rt, NULL, 10, -1, &l), TF_INVALID_ARGUMENT, "data is NULL");
  CHECK(l == NULL);
  CHECK(tf_locator_parse(rt, "dram:0:4KiB", TF_FILE_CREATE, 0, &l) == TF_OK);
  CHECK_FAILS(tf_pipe_connect(rt, l, NULL, NULL, &p), TF_INVALID_ARGUMENT, "to is NULL");
  tf_pipe_options o;
  tf_pipe_options_init(&o);
  o.mechanism = "warp-drive";
  CHECK_FAILS(tf_pipe_connect(rt, l, l, &o, &p), TF_INVALID_ARGUMENT, "warp-drive");
  o.mechanism = NULL;
  o.struct_size = 1;
  CHECK_FAILS(tf_pipe_connect(rt, l, l, &o, &p), TF_INVALID_ARGUMENT, "tf_pipe_options_init");
  CHECK(p == NULL);
  CHECK_FAILS(tf_pipe_transfer(NULL, 0, 0, 1), TF_INVALID_ARGUMENT, "pipe is NULL");
  CHECK_FAILS(tf_pipe_post(NULL, 0, 0, 1, 0), TF_INVALID_ARGUMENT, "pipe is NULL");
  CHECK_FAILS(tf_pipe_drain(NULL), TF_INVALID_ARGUMENT, "pipe is NULL");
  CHECK_FAILS(tf_handle_wait(NULL), TF_INVALID_ARGUMENT, "handle is NULL");
  CHECK_FAILS(tf_engine_submit(NULL, NULL, 1, NULL, NULL, NULL), TF_INVALID_ARGUMENT, "NULL");
  tf_completion c;
  CHECK(tf_pipe_reap(NULL, &c, 1) == 0 && tf_pipe_fd(NULL) == -1 && tf_pipe_posted(NULL) == 0);
  CHECK(tf_locator_capacity(NULL) == 0 && tf_locator_data(NULL) == NULL);
  CHECK(tf_pipe_explain(NULL, NULL, 0) == 0);
  tf_pipe_free(NULL);
  tf_handle_free(NULL);
  tf_engine_free(NULL);
  tf_locator_free(NULL);
  tf_runtime_free(NULL);
  tf_locator_free(l);
}

int main(void) {
  char dir[] = "/tmp/tierflow-capi-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  test_errors_and_version();
  tf_runtime_options ro;
  tf_runtime_options_init(&ro);
  ro.cpu_workers = 1;
  ro.use_dsa = 0;
  tf_runtime* rt = NULL;
  if (tf_runtime_create(&ro, &rt) != TF_OK) {
    fprintf(stderr, "tf_runtime_create: %s\n", tf_last_error());
    return 1;
  }
  test_memory_pipes(rt);
  test_files(rt, dir);
  test_engines();
  test_readiness(rt);
  test_bad_inputs(rt);
  tf_runtime_free(rt);
  rmdir(dir);
  if (failures != 0)
    fprintf(stderr, "capi_c_test: %d check(s) failed\n", failures);
  else
    printf("capi_c_test: every check held\n");
  return failures == 0 ? 0 : 1;
}
