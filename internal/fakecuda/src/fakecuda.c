// A stand-in for libcuda.so.1 that runs on the CPU, for testing package gpu's CUDA
// backend where there is no GPU. It implements the driver functions gpu binds with their
// documented contracts: device memory is host memory, each stream is a thread that runs
// its copies, kernel launches and event records in order, events complete when their
// stream reaches them, errors are CUresult codes, and a failed asynchronous operation
// leaves the context's error sticky, so every later call fails with it, as on a GPU.
// The conversion kernels run as body.ll compiled for the host, with the parameters read
// from the launch's kernelParams the way the driver reads them.
//
// Test hooks: fake_fail(op, n) makes the n-th later call of op (1 = the next) fail with
// CUDA_ERROR_ILLEGAL_ADDRESS (asynchronously for cuMemcpyHtoDAsync_v2 and cuLaunchKernel);
// fake_delay_us(us) makes every asynchronous copy take at least us microseconds;
// fake_set_total(n) sets the device's memory size (default 1 GiB);
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
	INVALID_IMAGE = 200, INVALID_CONTEXT = 201, INVALID_HANDLE = 400, NOT_FOUND = 500,
	NOT_READY = 600, ILLEGAL_ADDRESS = 700, ALREADY_REGISTERED = 712, NOT_REGISTERED = 713,
};

typedef void body(const uint8_t *in, void *out, int64_t i, int64_t plane, int32_t nchw, int32_t norm,
                  float m0, float m1, float m2, float s0, float s1, float s2);
body conveyor_pixel_f32, conveyor_pixel_f16, conveyor_pixel_bf16;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int initialised, primary_refs;
static CUresult sticky;
static int64_t total_mem = 1 << 30, used_mem;
static int delay_us;
static char fail_op[64];
static int fail_n;
static int primary_ctx = 1; // the primary context's handle is &primary_ctx

struct alloc { uintptr_t p; size_t n; struct alloc *next; };
static struct alloc *allocs, *registered;

static __thread int depth; // contexts pushed on this thread

// fail reports whether this call of op is the one fake_fail asked to fail.
static int fail(const char *op) {
	if (fail_n > 0 && !strcmp(op, fail_op) && --fail_n == 0) return 1;
	return 0;
}

void fake_fail(const char *op, int n) {
	pthread_mutex_lock(&mu);
	strncpy(fail_op, op, sizeof fail_op - 1);
	fail_n = n;
	pthread_mutex_unlock(&mu);
}
void fake_delay_us(int us) { delay_us = us; }
void fake_set_total(int64_t n) { pthread_mutex_lock(&mu); total_mem = n; pthread_mutex_unlock(&mu); }
int64_t fake_allocated(void) { pthread_mutex_lock(&mu); int64_t n = used_mem; pthread_mutex_unlock(&mu); return n; }
int fake_registered(void) {
	pthread_mutex_lock(&mu);
	int n = 0;
	for (struct alloc *a = registered; a; a = a->next) n++;
	pthread_mutex_unlock(&mu);
	return n;
}
// fake_reset clears the sticky error and the failure hooks: a new "process".
void fake_reset(void) { pthread_mutex_lock(&mu); sticky = 0; fail_n = 0; delay_us = 0; total_mem = 1 << 30; pthread_mutex_unlock(&mu); }

// inside reports whether [p, p+n) lies in one allocation of list.
static int inside(struct alloc *list, uintptr_t p, size_t n) {
	for (struct alloc *a = list; a; a = a->next)
		if (p >= a->p && p + n <= a->p + a->n) return 1;
	return 0;
}

// enter checks the call's preconditions under mu: initialised, a context current (when
// ctx), and no sticky error.
static CUresult enter(int ctx) {
	if (!initialised) return NOT_INITIALIZED;
	if (ctx && depth == 0) return INVALID_CONTEXT;
	return sticky;
}

CUresult cuInit(unsigned flags) { if (flags) return INVALID_VALUE; initialised = 1; return OK; }
CUresult cuDriverGetVersion(int *v) { *v = 12080; return OK; }
CUresult cuDeviceGetCount(int *n) { if (!initialised) return NOT_INITIALIZED; *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) { if (ordinal != 0) return INVALID_DEVICE; *d = 0; return OK; }
CUresult cuDeviceGetName(char *name, int len, int dev) {
	if (dev != 0) return INVALID_DEVICE;
	strncpy(name, "conveyor fake GPU", len);
	return OK;
}
CUresult cuDeviceTotalMem_v2(size_t *n, int dev) { if (dev != 0) return INVALID_DEVICE; *n = total_mem; return OK; }

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
	if (dev != 0) return INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	primary_refs++;
	pthread_mutex_unlock(&mu);
	*ctx = &primary_ctx;
	return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
	if (dev != 0) return INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	CUresult r = primary_refs > 0 ? OK : INVALID_CONTEXT;
	if (primary_refs > 0 && --primary_refs == 0) { // the context is destroyed with its memory
		sticky = 0;
		while (allocs) {
			struct alloc *x = allocs;
			allocs = x->next;
			free((void *)x->p);
			free(x);
		}
		used_mem = 0;
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

CUresult cuCtxPushCurrent_v2(void *ctx) { if (ctx != &primary_ctx) return INVALID_CONTEXT; depth++; return OK; }
CUresult cuCtxPopCurrent_v2(void **ctx) {
	if (depth == 0) return INVALID_CONTEXT;
	depth--;
	if (ctx) *ctx = &primary_ctx;
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
			if ((*a)->p == p) {
				struct alloc *x = *a;
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
	if (!r && inside(registered, (uintptr_t)p, 1)) r = ALREADY_REGISTERED;
	if (!r) {
		struct alloc *a = malloc(sizeof *a);
		a->p = (uintptr_t)p, a->n = n, a->next = registered;
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

// Streams: a thread running a queue of operations in order.
enum { OP_COPY, OP_KERNEL, OP_RECORD, OP_WAIT };
struct event { int recorded, done; CUresult err; };
struct op {
	int kind;
	void *dst; const void *src; size_t n; // copy
	body *fn; uint64_t in, out, pixels, plane; uint32_t nchw, norm; float ms[6]; unsigned threads; // kernel
	struct event *ev; // record, wait
	int failing;
	struct op *next;
};
struct stream { pthread_t th; struct op *head, *tail; int quit, busy; };

static void run(struct op *o) {
	if (o->failing) { sticky = ILLEGAL_ADDRESS; return; }
	if (sticky && o->kind != OP_RECORD) return;
	switch (o->kind) {
	case OP_COPY:
		pthread_mutex_unlock(&mu);
		if (delay_us) {
			struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
			nanosleep(&ts, NULL);
		}
		memcpy(o->dst, o->src, o->n);
		pthread_mutex_lock(&mu);
		break;
	case OP_KERNEL:
		pthread_mutex_unlock(&mu);
		for (uint64_t i = 0; i < o->threads; i++)
			if (i < o->pixels)
				o->fn((const uint8_t *)o->in, (void *)o->out, i, o->plane, o->nchw, o->norm,
				      o->ms[0], o->ms[1], o->ms[2], o->ms[3], o->ms[4], o->ms[5]);
		pthread_mutex_lock(&mu);
		break;
	case OP_RECORD:
		o->ev->done = 1;
		o->ev->err = sticky;
		break;
	case OP_WAIT:
		while (!o->ev->done) pthread_cond_wait(&cv, &mu);
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
		s->busy = 1;
		run(o);
		s->head = o->next;
		if (!s->head) s->tail = NULL;
		s->busy = 0;
		free(o);
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void enqueue(struct stream *s, struct op *o) {
	o->next = NULL;
	if (s->tail) s->tail->next = o; else s->head = o;
	s->tail = o;
	pthread_cond_broadcast(&cv);
}

CUresult cuStreamCreate(struct stream **ps, unsigned flags) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && flags > 1) r = INVALID_VALUE;
	if (!r) {
		struct stream *s = calloc(1, sizeof *s);
		pthread_create(&s->th, NULL, worker, s);
		*ps = s;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuStreamSynchronize(struct stream *s) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !s) r = INVALID_HANDLE;
	if (!r) {
		while (s->head) pthread_cond_wait(&cv, &mu);
		r = sticky;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuStreamDestroy_v2(struct stream *s) {
	if (!s) return INVALID_HANDLE;
	pthread_mutex_lock(&mu);
	if (depth == 0) { pthread_mutex_unlock(&mu); return INVALID_CONTEXT; }
	s->quit = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(s->th, NULL);
	free(s);
	return OK;
}

CUresult cuEventCreate(struct event **pe, unsigned flags) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && flags > 0xf) r = INVALID_VALUE;
	if (!r) *pe = calloc(1, sizeof **pe);
	pthread_mutex_unlock(&mu);
	return r;
}
CUresult cuEventDestroy_v2(struct event *e) {
	if (!e) return INVALID_HANDLE;
	pthread_mutex_lock(&mu);
	CUresult r = depth ? OK : INVALID_CONTEXT;
	pthread_mutex_unlock(&mu);
	if (!r) free(e); // like the driver, destroying an event in use is allowed
	return r;
}

CUresult cuEventRecord(struct event *e, struct stream *s) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && (!e || !s)) r = INVALID_HANDLE;
	if (!r) {
		e->recorded = 1, e->done = 0;
		struct op *o = calloc(1, sizeof *o);
		o->kind = OP_RECORD, o->ev = e;
		enqueue(s, o);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuEventQuery(struct event *e) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !e) r = INVALID_HANDLE;
	if (!r && e->recorded) r = !e->done ? NOT_READY : e->err;
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuEventSynchronize(struct event *e) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !e) r = INVALID_HANDLE;
	if (!r && e->recorded) {
		while (!e->done) pthread_cond_wait(&cv, &mu);
		r = e->err ? e->err : sticky;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuStreamWaitEvent(struct stream *s, struct event *e, unsigned flags) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && (!e || flags)) r = INVALID_VALUE;
	if (!r && e->recorded) {
		if (!s) { // the legacy default stream: nothing of ours runs there; wait here
			while (!e->done) pthread_cond_wait(&cv, &mu);
		} else {
			struct op *o = calloc(1, sizeof *o);
			o->kind = OP_WAIT, o->ev = e;
			enqueue(s, o);
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t n, struct stream *s) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !s) r = INVALID_HANDLE;
	if (!r && !inside(allocs, dst, n)) r = INVALID_VALUE;
	if (!r) {
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
	if (!r && !inside(allocs, dst, n)) r = INVALID_VALUE;
	pthread_mutex_unlock(&mu);
	if (!r) memcpy((void *)dst, src, n);
	return r;
}

CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && !inside(allocs, src, n)) r = INVALID_VALUE;
	pthread_mutex_unlock(&mu);
	if (!r) memcpy(dst, (void *)src, n);
	return r;
}

// Modules: the PTX text itself is the module; a function is an entry point it declares.
struct module { char *ptx; };
struct function { body *fn; };
static struct function fns[3] = {{conveyor_pixel_f32}, {conveyor_pixel_f16}, {conveyor_pixel_bf16}};
static const char *names[3] = {"conveyor_u8_to_f32", "conveyor_u8_to_f16", "conveyor_u8_to_bf16"};

CUresult cuModuleLoadData(struct module **pm, const void *image) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
	if (!r && (!image || !strstr(image, ".version ") || !strstr(image, ".target "))) r = INVALID_IMAGE;
	if (!r) {
		*pm = malloc(sizeof **pm);
		(*pm)->ptx = strdup(image);
	}
	pthread_mutex_unlock(&mu);
	return r;
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
                        unsigned bz, unsigned shmem, struct stream *s, void **params, void **extra) {
	pthread_mutex_lock(&mu);
	CUresult r = enter(1);
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
		if (!inside(allocs, o->in, o->pixels * 3) || !inside(allocs, o->out, o->pixels * 3 * bytes) || o->plane == 0)
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
	case ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
	case NOT_READY: return "CUDA_ERROR_NOT_READY";
	}
	return NULL;
}
CUresult cuGetErrorName(CUresult r, const char **s) { *s = errname(r); return *s ? OK : INVALID_VALUE; }
CUresult cuGetErrorString(CUresult r, const char **s) {
	*s = r == ILLEGAL_ADDRESS ? "an illegal memory access was encountered" : r == OUT_OF_MEMORY ? "out of memory" : NULL;
	return *s ? OK : INVALID_VALUE;
}
