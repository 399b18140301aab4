/* cuda_emu.cc: the host emulation of the CUDA runtime + cuBLAS subset declared in cuda_emu.h:
 * guarded device memory, deferred stream execution, graph capture/replay, kernel grids run as
 * cooperative fibers (one per CUDA thread), and column-major GEMMs. See cuda_emu.h for the contract. */
#include "gpu/emu/cuda_emu.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "gpu/core_api.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

/* x86-64 gets a register-only context switch (a few ns); elsewhere, or with -DTT_EMU_UCONTEXT,
 * ucontext (a signal-mask syscall per switch: correct, slower). */
#if defined(__x86_64__) && !defined(TT_EMU_UCONTEXT)
#define EMU_FAST_SWITCH 1
#endif

/* =============================================================================================
 * State */

namespace {

enum { OP_KERNEL, OP_COPY, OP_SET, OP_GEMM, OP_EVENT, OP_GRAPH };

struct op {
    int kind;
    const char *name;
    std::function<void()> run;
};

struct alloc_info {
    size_t size;          /* as requested */
    char *map;            /* whole mapping, guards included */
    size_t map_len;
    char *data;           /* the pages toggled between PROT_NONE and read/write */
    size_t data_len;
};

}  // namespace

struct emu_graph {
    std::vector<op> nodes;
};

struct emu_graph_exec {
    std::vector<op> nodes;
};

struct emu_stream {
    bool blocking = true;              /* synchronizes with the legacy default stream */
    std::deque<op> queue;
    emu_graph *capture = nullptr;      /* non-NULL while capturing */
    bool capture_invalid = false;
};

struct emu_event {
    emu_stream *stream = nullptr;
    bool recorded = false, done = false;
    double t = 0;
};

struct emu_cublas {
    cudaStream_t stream = nullptr;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

namespace {

struct emu_state {
    std::recursive_mutex mu;
    int device_count = 1;
    int device = 0;
    size_t capacity = (size_t)16 << 30;
    int descending = 0;
    long fault_countdown = 0;
    cudaError_t sticky = cudaSuccess;
    std::map<uintptr_t, alloc_info> allocs;       /* by user base */
    std::map<uintptr_t, size_t> pinned;           /* cudaMallocHost blocks */
    std::set<emu_stream *> streams;
    std::map<const void *, int> func_max_shared;  /* cudaFuncAttributeMaxDynamicSharedMemorySize */
    emu_stream null_stream;
    int device_depth = 0;
    bool protect = true;
    bool quiet = false;
    cuda_emu_stats stats{};
    char diagnostic[1024] = "";
};

emu_state &G()
{
    static emu_state *g = [] {
        emu_state *s = new emu_state;   /* never destroyed: usable from atexit paths */
        const char *p = getenv("TT_EMU_PROTECT");
        s->protect = !(p && strcmp(p, "0") == 0);
        /* TT_EMU_FAULT_AFTER=N: the N-th device operation fails with a sticky error, as
         * cuda_emu_inject_fault(N) does; lets end-to-end tests provoke a device failure. */
        const char *f = getenv("TT_EMU_FAULT_AFTER");
        if (f && *f)
            s->fault_countdown = strtol(f, NULL, 10);
        return s;
    }();
    return *g;
}

thread_local cudaError_t t_last = cudaSuccess;

const size_t default_shared_limit = 48 * 1024;
const size_t max_shared_limit = 227 * 1024;

#define ENTER()                                          \
    emu_state &g = G();                                  \
    std::lock_guard<std::recursive_mutex> lock_(g.mu);   \
    g.stats.api_calls++

/* The control functions (cuda_emu_ctl.h) are not API calls: they do not count. */
#define CONTROL()                                        \
    emu_state &g = G();                                  \
    std::lock_guard<std::recursive_mutex> lock_(g.mu)

cudaError_t set_error(cudaError_t e)
{
    if (e != cudaSuccess)
        t_last = e;
    return e;
}

void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void diag(const char *fmt, ...)
{
    emu_state &g = G();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g.diagnostic, sizeof g.diagnostic, fmt, ap);
    va_end(ap);
    if (!g.quiet)
        fprintf(stderr, "cuda emulation: %s\n", g.diagnostic);
}

[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda emulation: fatal: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

cudaError_t make_sticky(cudaError_t e)
{
    emu_state &g = G();
    if (g.sticky == cudaSuccess)
        g.sticky = e;
    return set_error(g.sticky);
}

double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

size_t page_size(void)
{
    static size_t p = (size_t)sysconf(_SC_PAGESIZE);
    return p;
}

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ---------------------------------------------------------------------------------------------
 * Memory classification and protection */

const alloc_info *find_alloc(const void *p)
{
    emu_state &g = G();
    uintptr_t a = (uintptr_t)p;
    auto it = g.allocs.upper_bound(a);
    if (it == g.allocs.begin())
        return nullptr;
    --it;
    if (a < it->first || a >= it->first + it->second.size)
        return nullptr;
    return &it->second;
}

/* Bytes of device memory from p to the end of its allocation (0 when p is not device memory). */
size_t device_room(const void *p)
{
    const alloc_info *ai = find_alloc(p);
    if (!ai)
        return 0;
    uintptr_t base = (uintptr_t)ai->data + ai->data_len - round_up(ai->size ? ai->size : 1, 256);
    return (size_t)(base + ai->size - (uintptr_t)p);
}

bool is_device(const void *p) { return find_alloc(p) != nullptr; }

bool is_pinned(const void *p, size_t n)
{
    emu_state &g = G();
    uintptr_t a = (uintptr_t)p;
    auto it = g.pinned.upper_bound(a);
    if (it == g.pinned.begin())
        return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
}

void protect_all(int prot)
{
    emu_state &g = G();
    if (!g.protect)
        return;
    for (auto &kv : g.allocs)
        if (mprotect(kv.second.data, kv.second.data_len, prot) != 0)
            fatal("mprotect failed");
}

/* Device memory is readable only while emulated device work runs. */
void device_enter(void)
{
    emu_state &g = G();
    if (g.device_depth++ == 0)
        protect_all(PROT_READ | PROT_WRITE);
}

void device_leave(void)
{
    emu_state &g = G();
    if (--g.device_depth == 0)
        protect_all(PROT_NONE);
}

/* ---------------------------------------------------------------------------------------------
 * Queues */

emu_stream *resolve(cudaStream_t s) { return s ? s : &G().null_stream; }

bool stream_valid(cudaStream_t s) { return !s || G().streams.count(s); }

bool any_capture(void)
{
    emu_state &g = G();
    if (g.null_stream.capture)
        return true;
    for (emu_stream *s : g.streams)
        if (s->capture)
            return true;
    return false;
}

/* A synchronizing call while a capture is active: the capture is invalidated, the call refused. */
cudaError_t refuse_during_capture(void)
{
    emu_state &g = G();
    for (emu_stream *s : g.streams)
        if (s->capture)
            s->capture_invalid = true;
    if (g.null_stream.capture)
        g.null_stream.capture_invalid = true;
    return set_error(cudaErrorStreamCaptureUnsupported);
}

/* Runs one operation unless a sticky error stops the device; the injected fault counts here. */
bool run_op(const op &o)
{
    emu_state &g = G();
    if (g.sticky != cudaSuccess)
        return false;
    if (g.fault_countdown > 0 && --g.fault_countdown == 0) {
        diag("injected fault: %s fails with an illegal address", o.name);
        g.sticky = cudaErrorIllegalAddress;
        return false;
    }
    o.run();
    return true;
}

cudaError_t drain(emu_stream *s)
{
    emu_state &g = G();
    if (s->queue.empty())
        return g.sticky;
    device_enter();
    while (!s->queue.empty()) {
        op o = std::move(s->queue.front());
        s->queue.pop_front();
        if (!run_op(o)) {
            s->queue.clear();
            break;
        }
    }
    device_leave();
    return g.sticky;
}

/* What waiting for the legacy default stream waits for: its own work and the blocking streams'. */
cudaError_t drain_legacy(void)
{
    emu_state &g = G();
    drain(&g.null_stream);
    for (emu_stream *s : g.streams)
        if (s->blocking)
            drain(s);
    return g.sticky;
}

cudaError_t drain_all(void)
{
    emu_state &g = G();
    drain(&g.null_stream);
    for (emu_stream *s : g.streams)
        drain(s);
    return g.sticky;
}

cudaError_t enqueue(cudaStream_t stream, op o)
{
    emu_stream *s = resolve(stream);
    if (s->capture) {
        if (s->capture_invalid)
            return set_error(cudaErrorStreamCaptureInvalidated);
        s->capture->nodes.push_back(std::move(o));
        return cudaSuccess;
    }
    /* The legacy default stream and the blocking streams wait for each other's earlier work;
     * a stream created with cudaStreamNonBlocking waits for neither. */
    if (s == &G().null_stream) {
        for (emu_stream *other : G().streams)
            if (other->blocking)
                drain(other);
    } else if (s->blocking) {
        drain(&G().null_stream);
    }
    s->queue.push_back(std::move(o));
    return cudaSuccess;
}

}  // namespace

/* =============================================================================================
 * Kernel execution: one cooperative fiber per CUDA thread */

dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace {

enum { F_RUN, F_BLOCK, F_WARP, F_DONE };

#ifdef EMU_ASAN
const size_t fiber_stack = 512 * 1024;
#else
const size_t fiber_stack = 64 * 1024;
#endif

struct fiber {
    char *stack = nullptr;          /* usable region [stack, stack + fiber_stack) above a guard page */
    void *sp = nullptr;             /* saved stack pointer (fast switch) */
    ucontext_t uc;
    int state = F_RUN;
    unsigned shfl_gen = 0;
    void *asan_fake = nullptr;
};

struct block_run {
    const char *kernel;
    const std::function<void()> *body;
    int n;
    fiber *fibers;
    int cur;
    void *sched_sp;
    ucontext_t sched_uc;
    const void *sched_bottom;
    size_t sched_size;
    void *sched_fake;
    char *dyn;
    size_t dyn_size;
    uint64_t slots[2][1024];
};

thread_local block_run *t_run;
thread_local std::vector<fiber> *t_pool;

#ifdef EMU_FAST_SWITCH
extern "C" void tt_emu_switch(void **save_sp, void *new_sp);
asm(".text\n"
    ".globl tt_emu_switch\n"
    ".hidden tt_emu_switch\n"
    ".type tt_emu_switch,@function\n"
    "tt_emu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size tt_emu_switch,.-tt_emu_switch\n");
#endif

void fiber_entry(void);

void fiber_init(fiber &f)
{
    f.state = F_RUN;
    f.shfl_gen = 0;
    f.asan_fake = nullptr;
#ifdef EMU_FAST_SWITCH
    /* The frame tt_emu_switch pops: control words, six callee-saved registers, then `ret` into
     * fiber_entry with the stack aligned as at a function's entry (rsp % 16 == 8). */
    uintptr_t top = ((uintptr_t)f.stack + fiber_stack) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 72);
    uint32_t mxcsr;
    uint16_t fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    sp[0] = (uint64_t)mxcsr | ((uint64_t)fpucw << 32);
    for (int i = 1; i <= 6; i++)
        sp[i] = 0;
    sp[7] = (uint64_t)(uintptr_t)&fiber_entry;
    sp[8] = 0;
    f.sp = sp;
#else
    if (getcontext(&f.uc) != 0)
        fatal("getcontext failed");
    f.uc.uc_stack.ss_sp = f.stack;
    f.uc.uc_stack.ss_size = fiber_stack;
    f.uc.uc_link = nullptr;
    makecontext(&f.uc, fiber_entry, 0);
#endif
}

void switch_to_fiber(block_run &r, fiber &f)
{
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&r.sched_fake, f.stack, fiber_stack);
#endif
#ifdef EMU_FAST_SWITCH
    tt_emu_switch(&r.sched_sp, f.sp);
#else
    swapcontext(&r.sched_uc, &f.uc);
#endif
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(r.sched_fake, nullptr, nullptr);
#endif
}

void switch_to_scheduler(block_run &r, fiber &f, bool exiting)
{
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(exiting ? nullptr : &f.asan_fake, r.sched_bottom, r.sched_size);
#else
    (void)exiting;
#endif
#ifdef EMU_FAST_SWITCH
    tt_emu_switch(&f.sp, r.sched_sp);
#else
    swapcontext(&f.uc, &r.sched_uc);
#endif
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(f.asan_fake, nullptr, nullptr);
#endif
}

void fiber_entry(void)
{
    block_run *r = t_run;
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &r->sched_bottom, &r->sched_size);
#endif
    (*r->body)();
    fiber &f = r->fibers[r->cur];
    f.state = F_DONE;
    switch_to_scheduler(*r, f, true);
    fatal("a finished emulated thread was resumed");
}

void set_thread_index(int i)
{
    unsigned bx = blockDim.x, by = blockDim.y;
    threadIdx.x = (unsigned)i % bx;
    threadIdx.y = ((unsigned)i / bx) % by;
    threadIdx.z = (unsigned)i / (bx * by);
}

void ensure_pool(int n)
{
    if (!t_pool)
        t_pool = new std::vector<fiber>;
    size_t guard = page_size();
    while ((int)t_pool->size() < n) {
        void *m = mmap(nullptr, fiber_stack + guard, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            fatal("cannot map a fiber stack");
        mprotect(m, guard, PROT_NONE);   /* stack overflow faults instead of corrupting */
        fiber f;
        f.stack = (char *)m + guard;
        t_pool->push_back(f);
    }
}

void run_block(block_run &r)
{
    emu_state &g = G();
    int n = r.n;
    for (int i = 0; i < n; i++)
        fiber_init(r.fibers[i]);
    for (;;) {
        for (int k = 0; k < n; k++) {
            int i = g.descending ? n - 1 - k : k;
            fiber &f = r.fibers[i];
            if (f.state != F_RUN)
                continue;
            r.cur = i;
            set_thread_index(i);
            switch_to_fiber(r, f);
        }
        /* No thread can run: release a barrier everyone it concerns has reached. */
        int done = 0, at_block = 0;
        bool released = false;
        for (int w = 0; w * 32 < n; w++) {
            int lo = w * 32, hi = lo + 32 < n ? lo + 32 : n, warp = 0, exited = 0;
            for (int i = lo; i < hi; i++) {
                warp += r.fibers[i].state == F_WARP;
                exited += r.fibers[i].state == F_DONE;
            }
            if (warp == hi - lo) {
                for (int i = lo; i < hi; i++)
                    r.fibers[i].state = F_RUN;
                g.stats.barriers += hi - lo;
                released = true;
            } else if (warp > 0) {
                fatal("kernel %s, block (%u,%u,%u): a warp-level barrier or shuffle in warp %d was "
                      "reached by %d of its %d lanes (%d exited, the rest wait at __syncthreads): "
                      "divergent warp synchronization", r.kernel, blockIdx.x, blockIdx.y, blockIdx.z,
                      w, warp, hi - lo, exited);
            }
            done += exited;
        }
        if (released)
            continue;
        for (int i = 0; i < n; i++)
            at_block += r.fibers[i].state == F_BLOCK;
        if (done == n)
            break;
        if (at_block + done != n)
            fatal("kernel %s: deadlock in block (%u,%u,%u)", r.kernel, blockIdx.x, blockIdx.y, blockIdx.z);
        /* Threads that exited do not hold __syncthreads back (as on sm_70+). */
        for (int i = 0; i < n; i++)
            if (r.fibers[i].state == F_BLOCK)
                r.fibers[i].state = F_RUN;
        g.stats.barriers += at_block;
    }
    g.stats.threads_run += n;
    g.stats.blocks_run++;
}

void run_grid(const char *kernel, dim3 grid, dim3 block, size_t shmem, const std::function<void()> &body)
{
    emu_state &g = G();
    int n = (int)(block.x * block.y * block.z);
    ensure_pool(n);
    std::vector<uint64_t> dyn((shmem + 7) / 8 + 1);
    block_run *r = new block_run();
    r->kernel = kernel;
    r->body = &body;
    r->n = n;
    r->fibers = t_pool->data();
    r->dyn = (char *)dyn.data();
    r->dyn_size = shmem;
    block_run *saved = t_run;
    t_run = r;
    blockDim = block;
    gridDim = grid;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = dim3(x, y, z);
                memset(r->dyn, 0xff, shmem);
                run_block(*r);
            }
    t_run = saved;
    delete r;
    g.stats.kernels_run++;
}

}  // namespace

void __syncthreads(void)
{
    block_run *r = t_run;
    if (!r)
        fatal("__syncthreads outside a kernel");
    fiber &f = r->fibers[r->cur];
    f.state = F_BLOCK;
    switch_to_scheduler(*r, f, false);
}

static void warp_barrier(block_run *r)
{
    fiber &f = r->fibers[r->cur];
    f.state = F_WARP;
    switch_to_scheduler(*r, f, false);
}

void __syncwarp(unsigned int mask)
{
    block_run *r = t_run;
    if (!r)
        fatal("__syncwarp outside a kernel");
    if (mask != 0xffffffffu)
        fatal("kernel %s: __syncwarp with a partial mask is not emulated", r->kernel);
    warp_barrier(r);
}

int emu_lane_id(void)
{
    if (!t_run)
        fatal("warp shuffle outside a kernel");
    return t_run->cur & 31;
}

uint64_t emu_warp_exchange(uint64_t bits, int src_lane, unsigned int mask, const char *what)
{
    block_run *r = t_run;
    int me = r->cur, base = me & ~31;
    if (mask != 0xffffffffu)
        fatal("kernel %s: %s with a partial mask is not emulated", r->kernel, what);
    if (base + 32 > r->n)
        fatal("kernel %s: %s in a partial warp (blocks of %d threads): use whole warps", r->kernel, what,
              r->n);
    /* Two slot sets used alternately: a lane can be at most one shuffle ahead of the slowest lane
     * of its warp, so one barrier per shuffle suffices. */
    fiber &f = r->fibers[me];
    uint64_t *slots = r->slots[f.shfl_gen++ & 1];
    slots[me] = bits;
    warp_barrier(r);
    return slots[base + src_lane];
}

void *emu_dynamic_shared(void)
{
    if (!t_run)
        fatal("dynamic shared memory outside a kernel");
    return t_run->dyn_size ? t_run->dyn : nullptr;
}

/* =============================================================================================
 * Runtime API */

static const struct {
    cudaError_t e;
    const char *name, *text;
} error_table[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
     "capture was not initiated in this stream"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const char *cudaGetErrorString(cudaError_t e)
{
    for (const auto &x : error_table)
        if (x.e == e)
            return x.text;
    return "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t e)
{
    for (const auto &x : error_table)
        if (x.e == e)
            return x.name;
    return "cudaErrorUnknown";
}

cudaError_t cudaGetLastError(void)
{
    ENTER();
    cudaError_t e = g.sticky != cudaSuccess ? g.sticky : t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    ENTER();
    return g.sticky != cudaSuccess ? g.sticky : t_last;
}

#define STICKY_CHECK()                 \
    do {                               \
        if (g.sticky != cudaSuccess)   \
            return set_error(g.sticky); \
    } while (0)

cudaError_t cudaGetDeviceCount(int *count)
{
    ENTER();
    *count = 0;
    if (g.device_count <= 0)
        return set_error(cudaErrorNoDevice);
    *count = g.device_count;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    ENTER();
    STICKY_CHECK();
    if (device < 0 || device >= g.device_count)
        return set_error(g.device_count <= 0 ? cudaErrorNoDevice : cudaErrorInvalidDevice);
    g.device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    ENTER();
    *device = g.device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    ENTER();
    if (device < 0 || device >= g.device_count)
        return set_error(g.device_count <= 0 ? cudaErrorNoDevice : cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "host emulation (gpu/emu)");
    prop->totalGlobalMem = g.capacity;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    prop->sharedMemPerBlock = default_shared_limit;
    prop->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    ENTER();
    if (device < 0 || device >= g.device_count)
        return set_error(g.device_count <= 0 ? cudaErrorNoDevice : cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 1; break;
    case cudaDevAttrMemoryClockRate: *value = 1000000; break;     /* kHz: a nominal 1 GHz */
    case cudaDevAttrGlobalMemoryBusWidth: *value = 256; break;    /* bits */
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    default: return set_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    ENTER();
    STICKY_CHECK();
    *total_bytes = g.capacity;
    *free_bytes = g.capacity > g.stats.bytes_in_use ? g.capacity - g.stats.bytes_in_use : 0;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = 13000;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    *version = 0;   /* no driver: this is the emulation */
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    ENTER();
    if (any_capture())
        return refuse_during_capture();
    return set_error(drain_all());
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    ENTER();
    *ptr = nullptr;
    STICKY_CHECK();
    if (any_capture())
        return refuse_during_capture();
    if (size > g.capacity || g.stats.bytes_in_use > g.capacity - size)
        return set_error(cudaErrorMemoryAllocation);
    size_t pg = page_size();
    size_t span = round_up(size ? size : 1, 256);
    size_t data_len = round_up(span, pg);
    size_t map_len = data_len + 2 * pg;
    void *m = mmap(nullptr, map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return set_error(cudaErrorMemoryAllocation);
    alloc_info ai;
    ai.size = size;
    ai.map = (char *)m;
    ai.map_len = map_len;
    ai.data = (char *)m + pg;
    ai.data_len = data_len;
    /* The allocation ends where the trailing guard page begins: overruns past the last 256-byte
     * granule fault. Fresh memory holds 0xff bytes (NaN as floats), as device memory holds garbage. */
    char *user = ai.data + data_len - span;
    mprotect(ai.data, data_len, PROT_READ | PROT_WRITE);
    memset(ai.data, 0xff, data_len);
    if (g.protect && g.device_depth == 0)
        mprotect(ai.data, data_len, PROT_NONE);
    g.allocs[(uintptr_t)user] = ai;
    g.stats.bytes_in_use += size;
    if (g.stats.bytes_in_use > g.stats.peak_bytes)
        g.stats.peak_bytes = g.stats.bytes_in_use;
    *ptr = user;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    ENTER();
    if (!ptr)
        return cudaSuccess;
    if (any_capture())
        return refuse_during_capture();
    drain_all();   /* cudaFree synchronizes the device */
    auto it = g.allocs.find((uintptr_t)ptr);
    if (it == g.allocs.end()) {
        diag("cudaFree(%p): not the start of a device allocation", ptr);
        return set_error(cudaErrorInvalidValue);
    }
    munmap(it->second.map, it->second.map_len);
    g.stats.bytes_in_use -= it->second.size;
    g.allocs.erase(it);
    return g.sticky != cudaSuccess ? set_error(g.sticky) : cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    ENTER();
    *ptr = nullptr;
    STICKY_CHECK();
    void *p = malloc(size ? size : 1);
    if (!p)
        return set_error(cudaErrorMemoryAllocation);
    g.pinned[(uintptr_t)p] = size;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr)
{
    ENTER();
    if (!ptr)
        return cudaSuccess;
    drain_all();
    auto it = g.pinned.find((uintptr_t)ptr);
    if (it == g.pinned.end()) {
        diag("cudaFreeHost(%p): not a cudaMallocHost block", ptr);
        return set_error(cudaErrorInvalidValue);
    }
    g.pinned.erase(it);
    free(ptr);
    return cudaSuccess;
}

namespace {

/* Checks a copy's direction against where its pointers live; both ranges must be inside one
 * allocation when on the device. */
cudaError_t check_copy(const char *call, void *dst, const void *src, size_t count, cudaMemcpyKind *kind)
{
    bool dd = is_device(dst), sd = is_device(src);
    if (*kind == cudaMemcpyDefault)
        *kind = dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                   : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    bool want_dd = *kind == cudaMemcpyHostToDevice || *kind == cudaMemcpyDeviceToDevice;
    bool want_sd = *kind == cudaMemcpyDeviceToHost || *kind == cudaMemcpyDeviceToDevice;
    if (*kind < cudaMemcpyHostToHost || *kind > cudaMemcpyDeviceToDevice)
        return set_error(cudaErrorInvalidMemcpyDirection);
    if (dd != want_dd || sd != want_sd) {
        diag("%s(dst=%p, src=%p, %zu bytes): the direction does not match where the pointers live "
             "(dst on %s, src on %s)", call, dst, src, count, dd ? "device" : "host",
             sd ? "device" : "host");
        return set_error(cudaErrorInvalidValue);
    }
    if ((dd && device_room(dst) < count) || (sd && device_room(src) < count)) {
        diag("%s(dst=%p, src=%p, %zu bytes): runs past the end of its device allocation", call, dst,
             src, count);
        return set_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

void copy_now(void *dst, const void *src, size_t count)
{
    device_enter();
    memmove(dst, src, count);
    device_leave();
    G().stats.memcpys_run++;
}

}  // namespace

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind)
{
    ENTER();
    STICKY_CHECK();
    if (count == 0)
        return cudaSuccess;
    cudaError_t e = check_copy("cudaMemcpy", dst, src, count, &kind);
    if (e != cudaSuccess)
        return e;
    if (any_capture())
        return refuse_during_capture();
    /* The legacy stream's rules (CUDA "API synchronization behavior"): from pageable host memory
     * the source is staged and the call returns before the device copy; device to device does not
     * wait either; to host memory, or from pinned memory, the call returns when the copy is done.
     * Streams created non-blocking are not waited for. */
    if (kind == cudaMemcpyHostToHost) {
        if (drain_legacy() != cudaSuccess)
            return set_error(g.sticky);
        memmove(dst, src, count);
        return cudaSuccess;
    }
    op o{OP_COPY, "cudaMemcpy", [dst, src, count]() {
             memmove(dst, src, count);
             G().stats.memcpys_run++;
         }};
    bool staged = kind == cudaMemcpyHostToDevice && !is_pinned(src, count);
    if (staged) {
        auto copy = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + count);
        o.run = [dst, copy]() {
            memcpy(dst, copy->data(), copy->size());
            G().stats.memcpys_run++;
        };
    }
    enqueue(nullptr, std::move(o));
    if (staged || kind == cudaMemcpyDeviceToDevice)
        return cudaSuccess;
    return set_error(drain_legacy());
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind, cudaStream_t stream)
{
    ENTER();
    STICKY_CHECK();
    if (!stream_valid(stream))
        return set_error(cudaErrorInvalidResourceHandle);
    if (count == 0)
        return cudaSuccess;
    cudaError_t e = check_copy("cudaMemcpyAsync", dst, src, count, &kind);
    if (e != cudaSuccess)
        return e;
    emu_stream *s = resolve(stream);
    /* Pageable host memory makes the copy synchronous (the host buffer is consumed before the call
     * returns); pinned memory is read or written when the stream reaches the copy. */
    bool pageable = (kind == cudaMemcpyHostToDevice && !is_pinned(src, count)) ||
                    (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, count)) ||
                    kind == cudaMemcpyHostToHost;
    if (pageable) {
        if (s->capture) {
            diag("cudaMemcpyAsync of %zu bytes with pageable host memory while capturing a graph: "
                 "use cudaMallocHost memory", count);
            s->capture_invalid = true;
            return set_error(cudaErrorStreamCaptureUnsupported);
        }
        if (drain(s) != cudaSuccess)
            return set_error(g.sticky);
        copy_now(dst, src, count);
        return cudaSuccess;
    }
    return set_error(enqueue(stream, op{OP_COPY, "cudaMemcpyAsync", [dst, src, count]() {
                                            memmove(dst, src, count);
                                            G().stats.memcpys_run++;
                                        }}));
}

cudaError_t cudaMemset(void *ptr, int value, size_t count)
{
    ENTER();
    STICKY_CHECK();
    if (count == 0)
        return cudaSuccess;
    if (device_room(ptr) < count) {
        diag("cudaMemset(%p, %zu bytes): not inside one device allocation", ptr, count);
        return set_error(cudaErrorInvalidValue);
    }
    if (any_capture())
        return refuse_during_capture();
    /* Asynchronous with respect to the host, on the legacy stream. */
    return set_error(enqueue(nullptr, op{OP_SET, "cudaMemset", [ptr, value, count]() {
                                             memset(ptr, value, count);
                                         }}));
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)
{
    ENTER();
    STICKY_CHECK();
    if (!stream_valid(stream))
        return set_error(cudaErrorInvalidResourceHandle);
    if (count == 0)
        return cudaSuccess;
    if (device_room(ptr) < count) {
        diag("cudaMemsetAsync(%p, %zu bytes): not inside one device allocation", ptr, count);
        return set_error(cudaErrorInvalidValue);
    }
    return set_error(enqueue(stream, op{OP_SET, "cudaMemsetAsync",
                                        [ptr, value, count]() { memset(ptr, value, count); }}));
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    ENTER();
    STICKY_CHECK();
    emu_stream *s = new emu_stream();
    s->blocking = !(flags & cudaStreamNonBlocking);
    g.streams.insert(s);
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    ENTER();
    if (!stream || !g.streams.count(stream))
        return set_error(cudaErrorInvalidResourceHandle);
    drain(stream);   /* pending work completes first, as on a device */
    delete stream->capture;
    g.streams.erase(stream);
    delete stream;
    return g.sticky != cudaSuccess ? set_error(g.sticky) : cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    ENTER();
    if (!stream_valid(stream))
        return set_error(cudaErrorInvalidResourceHandle);
    emu_stream *s = resolve(stream);
    if (s->capture) {
        s->capture_invalid = true;
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    return set_error(s == &g.null_stream ? drain_legacy() : drain(s));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    ENTER();
    STICKY_CHECK();
    if (!stream || !g.streams.count(stream))   /* the legacy stream cannot be captured */
        return set_error(stream ? cudaErrorInvalidResourceHandle : cudaErrorStreamCaptureUnsupported);
    if (stream->capture)
        return set_error(cudaErrorInvalidValue);
    stream->capture = new emu_graph();
    stream->capture_invalid = false;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    ENTER();
    *graph = nullptr;
    if (!stream || !g.streams.count(stream))
        return set_error(cudaErrorInvalidResourceHandle);
    if (!stream->capture)
        return set_error(cudaErrorStreamCaptureUnmatched);
    emu_graph *gr = stream->capture;
    bool invalid = stream->capture_invalid;
    stream->capture = nullptr;
    stream->capture_invalid = false;
    if (invalid) {
        delete gr;
        return set_error(cudaErrorStreamCaptureInvalidated);
    }
    *graph = gr;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
    ENTER();
    emu_stream *s = resolve(stream);
    *status = !s->capture ? cudaStreamCaptureStatusNone
              : s->capture_invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    ENTER();
    STICKY_CHECK();
    *event = new emu_event();
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    ENTER();
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    ENTER();
    STICKY_CHECK();
    if (!event || !stream_valid(stream))
        return set_error(cudaErrorInvalidResourceHandle);
    event->stream = resolve(stream);
    event->recorded = true;
    event->done = false;
    return set_error(enqueue(stream, op{OP_EVENT, "cudaEventRecord", [event]() {
                                            event->t = now_ms();
                                            event->done = true;
                                        }}));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    ENTER();
    if (!event)
        return set_error(cudaErrorInvalidResourceHandle);
    if (!event->recorded)
        return cudaSuccess;
    return set_error(drain(event->stream));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    ENTER();
    STICKY_CHECK();
    if (!start || !end)
        return set_error(cudaErrorInvalidResourceHandle);
    if (!start->done || !end->done)
        return set_error(cudaErrorNotReady);
    *ms = (float)(end->t - start->t);
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    ENTER();
    STICKY_CHECK();
    if (!graph)
        return set_error(cudaErrorInvalidValue);
    emu_graph_exec *x = new emu_graph_exec();
    x->nodes = graph->nodes;
    *exec = x;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    ENTER();
    STICKY_CHECK();
    if (!exec || !stream_valid(stream))
        return set_error(cudaErrorInvalidResourceHandle);
    g.stats.graph_launches++;
    return set_error(enqueue(stream, op{OP_GRAPH, "cudaGraphLaunch", [exec]() {
                                            for (const op &node : exec->nodes) {
                                                if (!run_op(node))
                                                    break;
                                                G().stats.graph_nodes_run++;
                                            }
                                        }}));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    ENTER();
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    ENTER();
    delete graph;
    return cudaSuccess;
}

cudaError_t emu_func_set_attribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    ENTER();
    STICKY_CHECK();
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || (size_t)value > max_shared_limit)
        return set_error(cudaErrorInvalidValue);
    g.func_max_shared[func] = value;
    return cudaSuccess;
}

/* ---------------------------------------------------------------------------------------------
 * Launches */

cudaError_t emu_launch_check(const char *kernel, const void *func, dim3 grid, dim3 block, size_t shmem,
                             cudaStream_t stream)
{
    ENTER();
    STICKY_CHECK();
    if (!stream_valid(stream))
        return set_error(cudaErrorInvalidResourceHandle);
    size_t threads = (size_t)block.x * block.y * block.z;
    size_t limit = default_shared_limit;
    auto it = g.func_max_shared.find(func);
    if (it != g.func_max_shared.end() && (size_t)it->second > limit)
        limit = (size_t)it->second;
    const char *bad = nullptr;
    if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
        bad = "block size";
    else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 ||
             grid.z > 65535)
        bad = "grid size";
    else if (shmem > limit)
        bad = "dynamic shared memory";
    if (bad) {
        diag("launch of %s<<<(%u,%u,%u), (%u,%u,%u), %zu>>>: invalid %s", kernel, grid.x, grid.y, grid.z,
             block.x, block.y, block.z, shmem, bad);
        emu_stream *s = resolve(stream);
        if (s->capture)
            s->capture_invalid = true;
        return set_error(cudaErrorInvalidConfiguration);
    }
    return cudaSuccess;
}

bool emu_kernel_pointer_ok(const char *kernel, int index, const void *p)
{
    ENTER();
    if (!p || is_device(p))
        return true;
    diag("kernel %s: argument %d is %p, which is not device memory (a host pointer passed to a kernel "
         "faults on a device)", kernel, index, p);
    return false;
}

cudaError_t emu_launch_bad_pointer(const char *kernel)
{
    ENTER();
    return make_sticky(cudaErrorIllegalAddress);
}

cudaError_t emu_launch_enqueue(const char *kernel, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                               std::function<void()> body)
{
    ENTER();
    g.stats.kernel_launches++;
    return set_error(enqueue(stream, op{OP_KERNEL, kernel, [kernel, grid, block, shmem, body]() {
                                            run_grid(kernel, grid, block, shmem, body);
                                        }}));
}

/* =============================================================================================
 * cuBLAS */

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    }
    return "unknown error";
}

const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    ENTER();
    if (g.sticky != cudaSuccess || g.device_count <= 0)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    *handle = new emu_cublas();
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    ENTER();
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

/* The handle setters below: one field of the handle, an API call that needs a handle. */
template <typename T>
static cublasStatus_t handle_set(cublasHandle_t handle, T emu_cublas::*field, T v)
{
    ENTER();
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->*field = v;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
    return handle_set(handle, &emu_cublas::stream, stream);
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes)
{
    ENTER();
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes && device_room(workspace) < bytes)
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    return handle_set(handle, &emu_cublas::math, mode);
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode)
{
    return handle_set(handle, &emu_cublas::pointer_mode, mode);
}

namespace {

tt_dtype emu_dtype(cudaDataType t) { return t == CUDA_R_32F ? TT_F32 : t == CUDA_R_16F ? TT_F16 : TT_BF16; }

size_t type_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

bool known_type(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

/* One operand's element span [lo, hi) relative to its pointer, over the whole batch. */
bool operand_in_bounds(const char *call, const char *which, const void *p, cudaDataType t, long long rows,
                       long long cols, long long ld, long long stride, long long batch)
{
    if (rows == 0 || cols == 0 || batch == 0)
        return true;
    long long last = (cols - 1) * ld + rows;          /* one past the last element of one matrix */
    long long lo = 0, hi = last;
    long long off = (batch - 1) * stride;
    if (off < 0) lo += off; else hi += off;
    size_t room = device_room(p);
    if (lo < 0 || room == 0 || (unsigned long long)hi * type_size(t) > room) {
        if (room == 0)
            diag("%s: %s=%p is not device memory", call, which, p);
        else
            diag("%s: %s (%lld x %lld, ld %lld, stride %lld, batch %lld) spans %lld bytes but its "
                 "allocation has %zu bytes from %p", call, which, rows, cols, ld, stride, batch,
                 hi * (long long)type_size(t), room, p);
        return false;
    }
    return true;
}

struct gemm_args {
    cublasOperation_t ta, tb;
    int m, n, k;
    float alpha, beta;
    const void *A; cudaDataType At; int lda; long long sA;
    const void *B; cudaDataType Bt; int ldb; long long sB;
    void *C; cudaDataType Ct; int ldc; long long sC;
    int batch;
};

void gemm_run(const gemm_args &a)
{
    /* op(A) as m rows of k, op(B) transposed as n rows of k: then every dot product is contiguous. */
    std::vector<float> am((size_t)a.m * a.k), bn((size_t)a.n * a.k);
    tt_dtype adt = emu_dtype(a.At), bdt = emu_dtype(a.Bt), cdt = emu_dtype(a.Ct);
    for (int b = 0; b < a.batch; b++) {
        const char *A = (const char *)a.A + (ptrdiff_t)(b * a.sA) * (ptrdiff_t)type_size(a.At);
        const char *B = (const char *)a.B + (ptrdiff_t)(b * a.sB) * (ptrdiff_t)type_size(a.Bt);
        char *C = (char *)a.C + (ptrdiff_t)(b * a.sC) * (ptrdiff_t)type_size(a.Ct);
        for (int i = 0; i < a.m; i++)
            for (int l = 0; l < a.k; l++) {
                size_t idx = a.ta == CUBLAS_OP_N ? (size_t)i + (size_t)l * a.lda : (size_t)l + (size_t)i * a.lda;
                am[(size_t)i * a.k + l] = tt_load_f32(A, adt, idx);
            }
        for (int j = 0; j < a.n; j++)
            for (int l = 0; l < a.k; l++) {
                size_t idx = a.tb == CUBLAS_OP_N ? (size_t)l + (size_t)j * a.ldb : (size_t)j + (size_t)l * a.ldb;
                bn[(size_t)j * a.k + l] = tt_load_f32(B, bdt, idx);
            }
        for (int j = 0; j < a.n; j++)
            for (int i = 0; i < a.m; i++) {
                const float *x = &am[(size_t)i * a.k], *y = &bn[(size_t)j * a.k];
                float acc = 0.0f;
                for (int l = 0; l < a.k; l++)
                    acc += x[l] * y[l];
                size_t ci = (size_t)i + (size_t)j * a.ldc;
                float v = a.alpha * acc;
                if (a.beta != 0.0f)                 /* beta == 0: C is not read (NaN-safe) */
                    v += a.beta * tt_load_f32(C, cdt, ci);
                tt_store_f32(C, cdt, ci, v);
            }
    }
    G().stats.gemms_run++;
}

cublasStatus_t gemm_submit(const char *call, cublasHandle_t h, gemm_args a, const void *alpha, const void *beta,
                           cublasComputeType_t compute)
{
    emu_state &g = G();
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (g.sticky != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    if (h->pointer_mode != CUBLAS_POINTER_MODE_HOST) {
        diag("%s: device pointer mode is not emulated", call);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (a.ta == CUBLAS_OP_C) a.ta = CUBLAS_OP_T;    /* real types: conjugate transpose == transpose */
    if (a.tb == CUBLAS_OP_C) a.tb = CUBLAS_OP_T;
    if ((a.ta != CUBLAS_OP_N && a.ta != CUBLAS_OP_T) || (a.tb != CUBLAS_OP_N && a.tb != CUBLAS_OP_T))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (a.m < 0 || a.n < 0 || a.k < 0 || a.batch < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    int a_rows = a.ta == CUBLAS_OP_N ? a.m : a.k, b_rows = a.tb == CUBLAS_OP_N ? a.k : a.n;
    if (a.lda < (a_rows > 1 ? a_rows : 1) || a.ldb < (b_rows > 1 ? b_rows : 1) || a.ldc < (a.m > 1 ? a.m : 1)) {
        diag("%s: leading dimension too small (m=%d n=%d k=%d lda=%d ldb=%d ldc=%d, op %c%c)", call, a.m, a.n,
             a.k, a.lda, a.ldb, a.ldc, a.ta == CUBLAS_OP_N ? 'N' : 'T', a.tb == CUBLAS_OP_N ? 'N' : 'T');
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC) {
        diag("%s: compute type %d is not emulated (CUBLAS_COMPUTE_32F is)", call, (int)compute);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    bool types_ok = known_type(a.At) && a.At == a.Bt && known_type(a.Ct) &&
                    (a.Ct == CUDA_R_32F || a.Ct == a.At);
    if (!types_ok) {
        diag("%s: type combination A=%d B=%d C=%d is not supported with CUBLAS_COMPUTE_32F", call, (int)a.At,
             (int)a.Bt, (int)a.Ct);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (a.m == 0 || a.n == 0 || a.batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    a.alpha = *(const float *)alpha;
    a.beta = *(const float *)beta;
    bool in = true;
    if (a.k > 0 && a.alpha != 0.0f) {
        in = in && operand_in_bounds(call, "A", a.A, a.At, a_rows, a.ta == CUBLAS_OP_N ? a.k : a.m, a.lda, a.sA,
                                     a.batch);
        in = in && operand_in_bounds(call, "B", a.B, a.Bt, b_rows, a.tb == CUBLAS_OP_N ? a.n : a.k, a.ldb, a.sB,
                                     a.batch);
    }
    in = in && operand_in_bounds(call, "C", a.C, a.Ct, a.m, a.n, a.ldc, a.sC, a.batch);
    if (!in) {
        make_sticky(cudaErrorIllegalAddress);   /* on a device this read or wrote out of bounds */
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    cudaError_t e = enqueue(h->stream, op{OP_GEMM, call, [a]() { gemm_run(a); }});
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                            int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda,
                            const void *B, cudaDataType Btype, int ldb,
                            const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    ENTER();
    gemm_args a = {transa, transb, m, n, k, 0, 0, A, Atype, lda, 0, B, Btype, ldb, 0, C, Ctype, ldc, 0, 1};
    return gemm_submit("cublasGemmEx", handle, a, alpha, beta, computeType);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha,
                                          const void *A, cudaDataType Atype, int lda, long long int strideA,
                                          const void *B, cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta,
                                          void *C, cudaDataType Ctype, int ldc, long long int strideC,
                                          int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo)
{
    ENTER();
    gemm_args a = {transa, transb, m, n, k, 0, 0, A, Atype, lda, strideA, B, Btype, ldb, strideB,
                   C, Ctype, ldc, strideC, batchCount};
    return gemm_submit("cublasGemmStridedBatchedEx", handle, a, alpha, beta, computeType);
}

/* =============================================================================================
 * Control (cuda_emu_ctl.h) */

/* The setters below: one field of the emulated device, set under its lock. */
template <typename T> static void control_set(T emu_state::*field, T v)
{
    CONTROL();
    g.*field = v;
}

extern "C" {

void cuda_emu_set_device_count(int n) { control_set(&emu_state::device_count, n); }

void cuda_emu_set_memory(size_t total_bytes) { control_set(&emu_state::capacity, total_bytes); }

void cuda_emu_set_thread_order(int descending) { control_set(&emu_state::descending, descending); }

void cuda_emu_inject_fault(long n) { control_set(&emu_state::fault_countdown, n); }

void cuda_emu_set_quiet(int quiet) { control_set(&emu_state::quiet, quiet != 0); }

void cuda_emu_clear_sticky_error(void)
{
    CONTROL();
    g.sticky = cudaSuccess;
    t_last = cudaSuccess;
}

void cuda_emu_get_stats(cuda_emu_stats *out)
{
    CONTROL();
    *out = g.stats;
}

const char *cuda_emu_last_diagnostic(void)
{
    return G().diagnostic;
}

}
