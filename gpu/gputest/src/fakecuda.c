// A stand-in for libcuda.so.1 that runs on the CPU, for testing package gpu's CUDA
// backend where there is no GPU. It implements the driver functions gpu binds with their
// documented contracts, and is no kinder than a GPU where that matters:
//   - device memory is host memory; allocations, streams and events belong to the context
//     current when they were made, and using them from another context fails;
//   - the primary context and contexts made with cuCtxCreate_v2; each has a legacy default
//     stream (stream handle 0) with no implicit ordering against non-blocking streams;
//   - each stream is a thread that runs its copies, kernel launches, event records and
//     waits in order; events complete when their stream reaches them;
//   - cuMemcpyHtoDAsync from memory that is not registered (cuMemHostRegister) is
//     synchronous, as the driver's pageable copies are: it waits for the stream's earlier
//     work, copies, then returns;
//   - errors are CUresult codes, and a failed asynchronous operation leaves the context's
//     error sticky, so every later call in it fails with it, as on a GPU;
//   - cuModuleLoadDataEx reads the PTX header as a CUDA 13.0 driver would (PTX ISA at most
//     9.0, .target at least sm_75) and writes its verdict into the JIT logs.
// The conversion kernels run as body.ll compiled for the host, with the parameters read
// from the launch's kernelParams the way the driver reads them.
//
// Test hooks: fake_fail(op, n) makes the n-th later call of op (1 = the next) fail with
// CUDA_ERROR_ILLEGAL_ADDRESS (asynchronously for cuMemcpyHtoDAsync_v2 and cuLaunchKernel);
// fake_delay_us(us) makes every copy take at least us microseconds;
// fake_set_total(n) sets the device's memory size (default 1 GiB);
// fake_register_fail(code) makes cuMemHostRegister_v2 fail with code (0: succeed), as does
// the environment variable CONVEYOR_FAKECUDA_REGISTER_FAIL (a CUresult, read at cuInit);
// fake_stream() makes a stream in the primary context and fake_read(stream, p, n, us)
// enqueues on it a "kernel" that reads device bytes [p, p+n) for us microseconds; a copy
// or kernel that writes into bytes with such a read still pending is a race, counted by
// fake_races(); fake_ctx_create() makes a context without making it current;
// fake_allocated() returns the device bytes in use; fake_registered() the host ranges.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
enum {
	OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, INVALID_DEVICE = 101,
	INVALID_IMAGE = 200, INVALID_CONTEXT = 201, INVALID_PTX = 218, UNSUPPORTED_PTX_VERSION = 222,
	INVALID_HANDLE = 400, NOT_FOUND = 500, NOT_READY = 600, ILLEGAL_ADDRESS = 700,
	ALREADY_REGISTERED = 712, NOT_REGISTERED = 713, NOT_SUPPORTED = 801,
};

// The driver this stand-in plays: CUDA 13.0, whose JIT takes PTX ISA up to 9.0 for
// targets from sm_75.
enum { DRIVER_VERSION = 13000, PTX_MAX_MAJOR = 9, PTX_MAX_MINOR = 0, MIN_TARGET = 75 };

typedef void body(const uint8_t *in, void *out, int64_t i, int64_t plane, int32_t nchw, int32_t norm,
                  float m0, float m1, float m2, float s0, float s1, float s2);
body conveyor_pixel_f32, conveyor_pixel_f16, conveyor_pixel_bf16;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int initialised, primary_refs;
static int64_t total_mem = 1 << 30, used_mem;
static int delay_us, register_fail, register_fail_env, races;
static char fail_op[64];
static int fail_n;

struct stream;
struct ctx { int alive; CUresult sticky; struct stream *legacy; };
static struct ctx primary;

struct alloc { uintptr_t p; size_t n; struct ctx *ctx; struct alloc *next; };
static struct alloc *allocs, *registered;

enum { MAX_DEPTH = 16 };
static __thread struct ctx *stack[MAX_DEPTH]; // contexts pushed on this thread
static __thread int depth;

static struct ctx *current(void) { return depth ? stack[depth - 1] : NULL; }

// fail reports whether this call of op is the one fake_fail asked to fail.
static int fail(const char *op) {
	if (fail_n > 0 && !strcmp(op, fail_op) && --fail_n == 0) return 1;
	return 0;
}
// failed is fail for the calls that are not otherwise under mu.
static int failed(const char *op) {
	pthread_mutex_lock(&mu);
	int f = fail(op);
	pthread_mutex_unlock(&mu);
	return f;
}

void fake_fail(const char *op, int n) {
	pthread_mutex_lock(&mu);
	strncpy(fail_op, op, sizeof fail_op - 1);
	fail_n = n;
	pthread_mutex_unlock(&mu);
}
void fake_delay_us(int us) { delay_us = us; }
void fake_set_total(int64_t n) { pthread_mutex_lock(&mu); total_mem = n; pthread_mutex_unlock(&mu); }
void fake_register_fail(int code) { pthread_mutex_lock(&mu); register_fail = code; pthread_mutex_unlock(&mu); }
int fake_races(void) { pthread_mutex_lock(&mu); int n = races; pthread_mutex_unlock(&mu); return n; }
int64_t fake_allocated(void) { pthread_mutex_lock(&mu); int64_t n = used_mem; pthread_mutex_unlock(&mu); return n; }
int fake_registered(void) {
	pthread_mutex_lock(&mu);
	int n = 0;
	for (struct alloc *a = registered; a; a = a->next) n++;
	pthread_mutex_unlock(&mu);
	return n;
}
// fake_reset clears the sticky errors and the failure hooks: a new "process".
void fake_reset(void) {
	pthread_mutex_lock(&mu);
	primary.sticky = 0;
	fail_n = 0, delay_us = 0, register_fail = 0, races = 0;
	total_mem = 1 << 30;
	pthread_mutex_unlock(&mu);
}

// inside reports whether [p, p+n) lies in one allocation of list (of context c, unless
// c is NULL).
static int inside(struct alloc *list, uintptr_t p, size_t n, struct ctx *c) {
	for (struct alloc *a = list; a; a = a->next)
		if (p >= a->p && p + n <= a->p + a->n && (!c || a->ctx == c)) return 1;
	return 0;
}

// enter checks the call's preconditions under mu: initialised, a live context current
// (when ctx), and no sticky error in it.
static CUresult enter(int ctx) {
	if (!initialised) return NOT_INITIALIZED;
	if (!ctx) return OK;
	struct ctx *c = current();
	if (!c || !c->alive) return INVALID_CONTEXT;
	return c->sticky;
}

CUresult cuInit(unsigned flags) {
	if (flags) return INVALID_VALUE;
	const char *v = getenv("CONVEYOR_FAKECUDA_REGISTER_FAIL");
	pthread_mutex_lock(&mu);
	if (v && *v) register_fail_env = atoi(v) > 0 ? atoi(v) : NOT_SUPPORTED;
	initialised = 1;
	pthread_mutex_unlock(&mu);
	return OK;
}
CUresult cuDriverGetVersion(int *v) {
	if (!v) return INVALID_VALUE;
	if (failed("cuDriverGetVersion")) return ILLEGAL_ADDRESS;
	*v = DRIVER_VERSION;
	return OK;
}
CUresult cuDeviceGetCount(int *n) { if (!initialised) return NOT_INITIALIZED; *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) { if (ordinal != 0) return INVALID_DEVICE; *d = 0; return OK; }
CUresult cuDeviceGetName(char *name, int len, int dev) {
	if (dev != 0) return INVALID_DEVICE;
	if (failed("cuDeviceGetName")) return ILLEGAL_ADDRESS;
	strncpy(name, "conveyor fake GPU", len);
	return OK;
}
CUresult cuDeviceTotalMem_v2(size_t *n, int dev) {
	if (dev != 0) return INVALID_DEVICE;
	if (failed("cuDeviceTotalMem_v2")) return ILLEGAL_ADDRESS;
	*n = total_mem;
	return OK;
}

// Streams: a thread running a queue of operations in order.
enum { OP_COPY, OP_KERNEL, OP_RECORD, OP_WAIT, OP_READ };
// An event's records are numbered: a wait or synchronisation is for the record made last
// before it was asked for, as in the driver, so recording the event again later does not
// change what an earlier wait waits for.
// Destroying an event its streams still have to reach is allowed: it is freed after them.
struct event { struct ctx *ctx; uint64_t recorded, done; CUresult err; int ops, destroyed; };

// unref drops an operation's reference to e, freeing it after cuEventDestroy. Under mu.
static void unref(struct event *e) {
	if (e && --e->ops == 0 && e->destroyed) free(e);
}
struct op {
	int kind;
	void *dst; const void *src; size_t n; // copy; read: src, n
	body *fn; uint64_t in, out, pixels, plane; uint32_t nchw, norm; float ms[6]; unsigned threads; // kernel
	struct event *ev; // record, wait
	uint64_t gen;     // record: its number; wait: the record it waits for
	int us;           // read
	uint64_t seq;     // when it was enqueued, in the order of all enqueues
	int failing;
	struct op *next;
};
struct stream {
	struct ctx *ctx;
	pthread_t th;
	struct op *head, *tail; // head is the operation running, until it is done
	int quit;
	struct stream *next_stream;
};
static struct stream *streams; // every stream alive, for the race check and handle checks
static uint64_t seq;            // operations enqueued so far

static int valid_stream(struct stream *s) {
	for (struct stream *x = streams; x; x = x->next_stream)
		if (x == s) return 1;
	return 0;
}

// hazard counts a race when bytes [p, p+n) are about to be written by an operation
// enqueued at wseq while a read of any of them enqueued before it has not finished: the
// write was asked for after the read and lands under it. (A read enqueued after the write
// is meant to see it.) Called under mu.
static void hazard(uintptr_t p, size_t n, uint64_t wseq) {
	for (struct stream *s = streams; s; s = s->next_stream)
		for (struct op *o = s->head; o; o = o->next)
			if (o->kind == OP_READ && o->seq < wseq && (uintptr_t)o->src < p + n && p < (uintptr_t)o->src + o->n) {
				races++;
				fprintf(stderr, "fakecuda: race: a write of %zu bytes at %#lx while a read of %zu bytes at %#lx is pending\n",
				        n, (unsigned long)p, o->n, (unsigned long)(uintptr_t)o->src);
				return;
			}
}

static void pause_us(int us) {
	if (us <= 0) return;
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static void run(struct stream *s, struct op *o) {
	struct ctx *c = s->ctx;
	if (o->failing) { c->sticky = ILLEGAL_ADDRESS; return; }
	if (c->sticky && o->kind != OP_RECORD) return;
	switch (o->kind) {
	case OP_COPY:
		hazard((uintptr_t)o->dst, o->n, o->seq);
		pthread_mutex_unlock(&mu);
		pause_us(delay_us);
		memcpy(o->dst, o->src, o->n);
		pthread_mutex_lock(&mu);
		break;
	case OP_KERNEL:
		hazard(o->out, o->pixels * 3 * (o->fn == conveyor_pixel_f32 ? 4 : 2), o->seq);
		pthread_mutex_unlock(&mu);
		for (uint64_t i = 0; i < o->threads; i++)
			if (i < o->pixels)
				o->fn((const uint8_t *)o->in, (void *)o->out, i, o->plane, o->nchw, o->norm,
				      o->ms[0], o->ms[1], o->ms[2], o->ms[3], o->ms[4], o->ms[5]);
		pthread_mutex_lock(&mu);
		break;
	case OP_READ:
		pthread_mutex_unlock(&mu);
		pause_us(o->us);
		pthread_mutex_lock(&mu);
		break;
	case OP_RECORD:
		if (o->gen > o->ev->done) o->ev->done = o->gen;
		o->ev->err = c->sticky;
		break;
	case OP_WAIT:
		while (o->ev->done < o->gen) pthread_cond_wait(&cv, &mu);
		break;
	}
}

static void *worker(void *arg) {
	struct stream *s = arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!s->head && !s->quit) pthread_cond_wait(&cv, &mu);
		if (!s->head) break;
		struct op *o = s->head;
		run(s, o);
		s->head = o->next;
		if (!s->head) s->tail = NULL;
		unref(o->ev);
		free(o);
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void enqueue(struct stream *s, struct op *o) {
	o->next = NULL;
	o->seq = ++seq;
	if (s->tail) s->tail->next = o; else s->head = o;
	s->tail = o;
	pthread_cond_broadcast(&cv);
}

// new_stream starts a stream of context c. Called under mu.
static struct stream *new_stream(struct ctx *c) {
	struct stream *s = calloc(1, sizeof *s);
	s->ctx = c;
	s->next_stream = streams;
	streams = s;
	pthread_create(&s->th, NULL, worker, s);
	return s;
}

// end_stream stops s after its queue drains and frees it. Called under mu, which it
// releases while it joins the thread.
static void end_stream(struct stream *s) {
	for (struct stream **x = &streams; *x; x = &(*x)->next_stream)
		if (*x == s) { *x = s->next_stream; break; }
	s->quit = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(s->th, NULL);
	pthread_mutex_lock(&mu);
	free(s);
}

// resolve maps a stream handle to the stream, 0 being the current context's legacy default
// stream; NULL when the handle is not a stream of the current context. Called under mu.
static struct stream *resolve(struct stream *s) {
	struct ctx *c = current();
	if (!s) {
		if (!c->legacy) c->legacy = new_stream(c);
		return c->legacy;
	}
	return valid_stream(s) && s->ctx == c ? s : NULL;
}

// drop_context frees what context c owned: its memory and its legacy stream. Called
// under mu.
static void drop_context(struct ctx *c) {
	for (struct alloc **a = &allocs; *a;) {
		if ((*a)->ctx != c) { a = &(*a)->next; continue; }
		struct alloc *x = *a;
		*a = x->next;
		used_mem -= x->n;
		free((void *)x->p);
		free(x);
	}
	if (c->legacy) {
		struct stream *s = c->legacy;
		c->legacy = NULL;
		end_stream(s);
	}
	c->sticky = 0;
	c->alive = 0;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
	if (dev != 0) return INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	if (primary_refs++ == 0) primary.alive = 1;
	pthread_mutex_unlock(&mu);
	*ctx = &primary;
	return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
	if (dev != 0) return INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	CUresult r = primary_refs > 0 ? OK : INVALID_CONTEXT;
	if (primary_refs > 0 && --primary_refs == 0) { // the context is destroyed with its memory
		drop_context(&primary);
		while (registered) {
			struct alloc *x = registered;
			registered = x->next;
			free(x);
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}
int fake_primary_refs(void) { return primary_refs; }

// cuCtxCreate_v2 makes a context and pushes it onto the calling thread.
CUresult cuCtxCreate_v2(struct ctx **pctx, unsigned flags, int dev) {
	if (!initialised) return NOT_INITIALIZED;
	if (dev != 0) return INVALID_DEVICE;
	if (!pctx || depth == MAX_DEPTH) return INVALID_VALUE;
	struct ctx *c = calloc(1, sizeof *c);
	c->alive = 1;
	stack[depth++] = c;
	*pctx = c;
	return OK;
}
CUresult cuCtxDestroy_v2(struct ctx *c) {
	if (!c || c == &primary) return INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	drop_context(c);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < depth; i++)
		if (stack[i] == c) stack[i] = NULL; // a destroyed context stays on the stack, unusable
	return OK;
}
// fake_ctx_create makes a context without leaving it current, for tests of OpenContext.
struct ctx *fake_ctx_create(void) {
	struct ctx *c = calloc(1, sizeof *c);
	c->alive = 1;
	return c;
}
int64_t fake_ctx_allocated(struct ctx *c) {
	pthread_mutex_lock(&mu);
	int64_t n = 0;
	for (struct alloc *a = allocs; a; a = a->next)
		if (a->ctx == c) n += a->n;
	pthread_mutex_unlock(&mu);
	return n;
}

CUresult cuCtxPushCurrent_v2(struct ctx *c) {
	if (!c || (c != &primary && !c->alive) || (c == &primary && primary_refs == 0)) return INVALID_CONTEXT;
	if (depth == MAX_DEPTH) return INVALID_VALUE;
	stack[depth++] = c;
	return OK;
}
CUresult cuCtxPopCurrent_v2(struct ctx **pctx) {
	if (depth == 0) return INVALID_CONTEXT;
	if (failed("cuCtxPopCurrent_v2")) return ILLEGAL_ADDRESS; // the context stays current
	struct ctx *c = stack[--depth];
	if (pctx) *pctx = c;
	return OK;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r) { *free = total_mem - used_mem; *total = total_mem; }
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemAlloc_v2(uint64_t *p, size_t n) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && n == 0) r = INVALID_VALUE;
	if (!r && (used_mem + (int64_t)n > total_mem || fail("cuMemAlloc_v2"))) r = OUT_OF_MEMORY;
	if (!r) {
		struct alloc *a = malloc(sizeof *a);
		a->p = (uintptr_t)aligned_alloc(256, (n + 255) / 256 * 256);
		a->n = n;
		a->ctx = current();
		a->next = allocs;
		allocs = a;
		used_mem += n;
		*p = a->p;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemFree_v2(uint64_t p) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r) {
		r = INVALID_VALUE;
		for (struct alloc **a = &allocs; *a; a = &(*a)->next)
			if ((*a)->p == p && (*a)->ctx == current()) {
				struct alloc *x = *a;
				hazard(x->p, x->n, ++seq); // freeing bytes a step still reads
				*a = x->next;
				used_mem -= x->n;
				free((void *)x->p);
				free(x);
				r = OK;
				break;
			}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && (n == 0 || flags > 0xf)) r = INVALID_VALUE;
	if (!r && register_fail) r = register_fail;
	if (!r && register_fail_env) r = register_fail_env;
	if (!r && inside(registered, (uintptr_t)p, 1, NULL)) r = ALREADY_REGISTERED;
	if (!r) {
		struct alloc *a = malloc(sizeof *a);
		a->p = (uintptr_t)p, a->n = n, a->ctx = NULL, a->next = registered;
		registered = a;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemHostUnregister(void *p) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r) {
		r = NOT_REGISTERED;
		for (struct alloc **a = &registered; *a; a = &(*a)->next)
			if ((*a)->p == (uintptr_t)p) {
				struct alloc *x = *a;
				*a = x->next;
				free(x);
				r = OK;
				break;
			}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuStreamCreate(struct stream **ps, unsigned flags) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && flags > 1) r = INVALID_VALUE;
	if (!r) *ps = new_stream(current());
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuStreamSynchronize(struct stream *h) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	struct stream *s = r ? NULL : resolve(h);
	if (!r && !s) r = INVALID_HANDLE;
	if (!r) {
		while (s->head) pthread_cond_wait(&cv, &mu);
		r = s->ctx->sticky;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuStreamDestroy_v2(struct stream *s) {
	pthread_mutex_lock(&mu);
	CUresult r = current() ? OK : INVALID_CONTEXT;
	if (!r && (!s || !valid_stream(s) || s->ctx != current() || s == current()->legacy)) r = INVALID_HANDLE;
	if (!r) end_stream(s);
	pthread_mutex_unlock(&mu);
	return r;
}

// fake_stream makes a stream in the primary context, for a test's stand-in training step.
struct stream *fake_stream(void) {
	pthread_mutex_lock(&mu);
	struct stream *s = new_stream(&primary);
	pthread_mutex_unlock(&mu);
	return s;
}
void fake_stream_destroy(struct stream *s) {
	pthread_mutex_lock(&mu);
	if (valid_stream(s)) end_stream(s);
	pthread_mutex_unlock(&mu);
}
// fake_read enqueues a kernel that reads device bytes [p, p+n) for us microseconds on s
// (0: the primary context's legacy default stream).
int fake_read(struct stream *s, uint64_t p, size_t n, int us) {
	pthread_mutex_lock(&mu);
	if (!s) {
		if (!primary.legacy) primary.legacy = new_stream(&primary);
		s = primary.legacy;
	}
	CUresult r = valid_stream(s) ? OK : INVALID_HANDLE;
	if (!r) {
		struct op *o = calloc(1, sizeof *o);
		o->kind = OP_READ, o->src = (const void *)(uintptr_t)p, o->n = n, o->us = us;
		enqueue(s, o);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

static int valid_event(struct event *e) { return e && e->ctx == current(); }

CUresult cuEventCreate(struct event **pe, unsigned flags) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && flags > 0xf) r = INVALID_VALUE;
	if (!r) {
		*pe = calloc(1, sizeof **pe);
		(*pe)->ctx = current();
	}
	pthread_mutex_unlock(&mu);
	return r;
}
CUresult cuEventDestroy_v2(struct event *e) {
	if (!e) return INVALID_HANDLE;
	pthread_mutex_lock(&mu);
	CUresult r = current() ? OK : INVALID_CONTEXT;
	if (!r) {
		e->destroyed = 1, e->ctx = NULL; // no longer a valid handle
		e->ops++, unref(e);             // freed now, or after the operations that use it
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuEventRecord(struct event *e, struct stream *h) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	struct stream *s = r ? NULL : resolve(h);
	if (!r && (!valid_event(e) || !s)) r = INVALID_HANDLE;
	if (!r) {
		struct op *o = calloc(1, sizeof *o);
		o->kind = OP_RECORD, o->ev = e, o->gen = ++e->recorded;
		e->ops++;
		enqueue(s, o);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuEventQuery(struct event *e) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !valid_event(e)) r = INVALID_HANDLE;
	if (!r && e->recorded) r = e->done < e->recorded ? NOT_READY : e->err;
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuEventSynchronize(struct event *e) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !valid_event(e)) r = INVALID_HANDLE;
	if (!r && e->recorded) {
		uint64_t gen = e->recorded;
		while (e->done < gen) pthread_cond_wait(&cv, &mu);
		r = e->err ? e->err : current()->sticky;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

// cuStreamWaitEvent makes the stream (0: the legacy default stream) wait for the event's
// work on the device; the host never waits.
CUresult cuStreamWaitEvent(struct stream *h, struct event *e, unsigned flags) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && flags) r = INVALID_VALUE;
	struct stream *s = r ? NULL : resolve(h);
	if (!r && (!valid_event(e) || !s)) r = INVALID_HANDLE;
	if (!r && e->recorded) {
		struct op *o = calloc(1, sizeof *o);
		o->kind = OP_WAIT, o->ev = e, o->gen = e->recorded;
		e->ops++;
		enqueue(s, o);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t n, struct stream *h) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	struct stream *s = r ? NULL : resolve(h);
	if (!r && !s) r = INVALID_HANDLE;
	if (!r && !inside(allocs, dst, n, current())) r = INVALID_VALUE;
	if (!r && !inside(registered, (uintptr_t)src, n, NULL)) {
		// Pageable memory: the driver syncs the stream, stages the bytes and returns when
		// the host buffer may be reused, so the copy is not asynchronous.
		while (s->head) pthread_cond_wait(&cv, &mu);
		r = s->ctx->sticky;
		if (!r && fail("cuMemcpyHtoDAsync_v2")) r = s->ctx->sticky = ILLEGAL_ADDRESS;
		if (!r) {
			hazard(dst, n, ++seq);
			pthread_mutex_unlock(&mu);
			pause_us(delay_us);
			memcpy((void *)dst, src, n);
			pthread_mutex_lock(&mu);
		}
	} else if (!r) {
		struct op *o = calloc(1, sizeof *o);
		o->kind = OP_COPY, o->dst = (void *)dst, o->src = src, o->n = n;
		o->failing = fail("cuMemcpyHtoDAsync_v2");
		enqueue(s, o);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !inside(allocs, dst, n, current())) r = INVALID_VALUE;
	if (!r) hazard(dst, n, ++seq);
	pthread_mutex_unlock(&mu);
	if (!r) memcpy((void *)dst, src, n);
	return r;
}

CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !inside(allocs, src, n, current())) r = INVALID_VALUE;
	pthread_mutex_unlock(&mu);
	if (!r) memcpy(dst, (void *)src, n);
	return r;
}

// Modules: the PTX text itself is the module; a function is an entry point it declares.
struct module { char *ptx; };
struct function { body *fn; };
static struct function fns[3] = {{conveyor_pixel_f32}, {conveyor_pixel_f16}, {conveyor_pixel_bf16}};
static const char *names[3] = {"conveyor_u8_to_f32", "conveyor_u8_to_f16", "conveyor_u8_to_bf16"};

// JIT options of cuModuleLoadDataEx (CUjit_option).
enum { JIT_INFO_LOG = 3, JIT_INFO_LOG_SIZE = 4, JIT_ERROR_LOG = 5, JIT_ERROR_LOG_SIZE = 6, JIT_LOG_VERBOSE = 12 };

// jit_log writes msg into the log buffer of option buf (size option size), NUL-terminated
// and truncated to fit, and sets the size option to the bytes written, as the driver does.
static void jit_log(unsigned n, const int *opts, void **vals, int buf, int size, const char *msg) {
	char *b = NULL;
	int sz = -1;
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == buf) b = vals[i];
		if (opts[i] == size) sz = i;
	}
	if (!b || sz < 0) return;
	size_t cap = (uintptr_t)vals[sz];
	if (cap == 0) return;
	size_t len = strlen(msg);
	if (len >= cap) len = cap - 1;
	memcpy(b, msg, len);
	b[len] = 0;
	vals[sz] = (void *)(uintptr_t)len;
}

// line returns the 1-based line number of p in text.
static int line(const char *text, const char *p) {
	int l = 1;
	for (; text < p; text++) l += *text == '\n';
	return l;
}

CUresult cuModuleLoadDataEx(struct module **pm, const void *image, unsigned n, const int *opts, void **vals) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	pthread_mutex_unlock(&mu);
	if (r) return r;
	if (!pm || (n && (!opts || !vals))) return INVALID_VALUE;
	for (unsigned i = 0; i < n; i++)
		if (opts[i] != JIT_INFO_LOG && opts[i] != JIT_INFO_LOG_SIZE && opts[i] != JIT_ERROR_LOG &&
		    opts[i] != JIT_ERROR_LOG_SIZE && opts[i] != JIT_LOG_VERBOSE)
			return INVALID_VALUE;
	const char *ptx = image;
	char msg[256];
	const char *v = ptx ? strstr(ptx, ".version ") : NULL, *t = ptx ? strstr(ptx, ".target ") : NULL;
	int major = 0, minor = 0, target = 0;
	if (!v || !t || sscanf(v, ".version %d.%d", &major, &minor) != 2 || sscanf(t, ".target sm_%d", &target) != 1) {
		snprintf(msg, sizeof msg, "ptxas application ptx input, line 1; fatal   : Missing .version or .target directive");
		jit_log(n, opts, vals, JIT_ERROR_LOG, JIT_ERROR_LOG_SIZE, msg);
		return INVALID_PTX;
	}
	if (major > PTX_MAX_MAJOR || (major == PTX_MAX_MAJOR && minor > PTX_MAX_MINOR)) {
		snprintf(msg, sizeof msg, "ptxas application ptx input, line %d; fatal   : Unsupported .version %d.%d; current version is '%d.%d'",
		         line(ptx, v), major, minor, PTX_MAX_MAJOR, PTX_MAX_MINOR);
		jit_log(n, opts, vals, JIT_ERROR_LOG, JIT_ERROR_LOG_SIZE, msg);
		return UNSUPPORTED_PTX_VERSION;
	}
	if (target < MIN_TARGET) {
		snprintf(msg, sizeof msg, "ptxas application ptx input, line %d; fatal   : Unsupported .target 'sm_%d'", line(ptx, t), target);
		jit_log(n, opts, vals, JIT_ERROR_LOG, JIT_ERROR_LOG_SIZE, msg);
		return INVALID_PTX;
	}
	snprintf(msg, sizeof msg, "ptxas info    : PTX ISA %d.%d for sm_%d compiled for the stand-in GPU", major, minor, target);
	jit_log(n, opts, vals, JIT_INFO_LOG, JIT_INFO_LOG_SIZE, msg);
	jit_log(n, opts, vals, JIT_ERROR_LOG, JIT_ERROR_LOG_SIZE, "");
	*pm = malloc(sizeof **pm);
	(*pm)->ptx = strdup(ptx);
	return OK;
}

CUresult cuModuleGetFunction(struct function **pf, struct module *m, const char *name) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !m) r = INVALID_HANDLE;
	if (!r) {
		char decl[128];
		r = NOT_FOUND;
		for (int k = 0; k < 3; k++) {
			snprintf(decl, sizeof decl, ".entry %s(", name);
			if (!strcmp(name, names[k]) && strstr(m->ptx, decl)) { *pf = &fns[k]; r = OK; }
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuModuleUnload(struct module *m) {
	if (!m) return INVALID_HANDLE;
	free(m->ptx);
	free(m);
	return OK;
}

CUresult cuLaunchKernel(struct function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, struct stream *h, void **params, void **extra) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	struct stream *s = r ? NULL : resolve(h);
	if (!r && (!f || !s)) r = INVALID_HANDLE;
	if (!r && (gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx > 1024 || by != 1 || bz != 1 || shmem || !params || extra)) r = INVALID_VALUE;
	if (!r) {
		struct op *o = calloc(1, sizeof *o);
		o->kind = OP_KERNEL, o->fn = f->fn, o->threads = gx * bx;
		o->in = *(uint64_t *)params[0], o->out = *(uint64_t *)params[1];
		o->pixels = *(uint64_t *)params[2], o->plane = *(uint64_t *)params[3];
		o->nchw = *(uint32_t *)params[4], o->norm = *(uint32_t *)params[5];
		for (int k = 0; k < 6; k++) o->ms[k] = *(float *)params[6 + k];
		int bytes = f->fn == conveyor_pixel_f32 ? 4 : 2;
		if (!inside(allocs, o->in, o->pixels * 3, current()) || !inside(allocs, o->out, o->pixels * 3 * bytes, current()) || o->plane == 0)
			o->failing = 1; // an out-of-bounds kernel faults asynchronously
		o->failing |= fail("cuLaunchKernel");
		enqueue(s, o);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

static const char *errname(CUresult r) {
	switch (r) {
	case OK: return "CUDA_SUCCESS";
	case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
	case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
	case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
	case INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
	case UNSUPPORTED_PTX_VERSION: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
	case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
	case ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
	case NOT_READY: return "CUDA_ERROR_NOT_READY";
	case NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
	}
	return NULL;
}
CUresult cuGetErrorName(CUresult r, const char **s) { *s = errname(r); return *s ? OK : INVALID_VALUE; }
CUresult cuGetErrorString(CUresult r, const char **s) {
	*s = r == ILLEGAL_ADDRESS ? "an illegal memory access was encountered" : r == OUT_OF_MEMORY ? "out of memory" : NULL;
	return *s ? OK : INVALID_VALUE;
}
