/* gpu_plugin.c: finding and opening the GPU backend's shared object (gpu/gpu_plugin.h). Linked into
 * tokentop; maps nothing of CUDA until a plugin is opened. */
#include "gpu/gpu_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The process-wide answer: a loaded library is process-wide state whatever we do, and opening it
 * twice would only give the same handle. Written by the first gpu_plugin_load call only. */
static struct {
    bool tried;
    const gpu_plugin *table;
    char path[PATH_MAX];
    char why[400];
} loaded;

static bool is_file(const char *p)
{
    return access(p, R_OK) == 0;
}

/* Opens path and checks its table; on failure leaves the reason in loaded.why. */
static void open_plugin(const char *path)
{
    /* RTLD_NOW: a symbol the binary does not export fails here, with its name, not mid-run. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(loaded.why, sizeof loaded.why, "cannot load %s (%s)", path, dlerror());
        return;
    }
    const gpu_plugin *(*entry)(void) = (const gpu_plugin *(*)(void))dlsym(h, GPU_PLUGIN_ENTRY);
    const gpu_plugin *t = entry ? entry() : NULL;
    if (!t) {
        snprintf(loaded.why, sizeof loaded.why, "%s: no %s entry point (not a tokentop GPU plugin)",
                 path, GPU_PLUGIN_ENTRY);
    } else if (t->abi != GPU_PLUGIN_ABI || t->size != sizeof(gpu_plugin)) {
        snprintf(loaded.why, sizeof loaded.why, "%s: plugin ABI %d (table of %zu bytes), this "
                 "tokentop expects %d (%zu bytes): a plugin from another build", path, t->abi,
                 t->size, GPU_PLUGIN_ABI, sizeof(gpu_plugin));
    } else {
        loaded.table = t;
        snprintf(loaded.path, sizeof loaded.path, "%s", path);
        return;
    }
    dlclose(h);
}

/* The first of dir/name and dir/../lib/tokentop/name that exists, into out. */
static bool find_beside(const char *dir, const char *name, char *out, size_t cap)
{
    if (!dir)
        return false;
    snprintf(out, cap, "%s/%s", dir, name);
    if (is_file(out))
        return true;
    snprintf(out, cap, "%s/../lib/tokentop/%s", dir, name);
    return is_file(out);
}

static void load(const char *exe_dir)
{
    const char *env = getenv(GPU_PLUGIN_ENV);
    if (env && *env) {
        open_plugin(env);
        if (!loaded.table && !is_file(env))
            snprintf(loaded.why, sizeof loaded.why, "%s=%s: no such file", GPU_PLUGIN_ENV, env);
        return;
    }
    char path[PATH_MAX + 64];
    if (find_beside(exe_dir, GPU_PLUGIN_FILE, path, sizeof path)) {
        /* The driver first: without it cudart can only say "no device", after mapping itself and
         * cuBLAS (hundreds of MB resident and a noticeable start-up time), which a CPU run must
         * not pay. */
        void *driver = dlopen(GPU_DRIVER_LIB, RTLD_LAZY | RTLD_LOCAL);
        if (!driver) {
            const char *e = dlerror();
            snprintf(loaded.why, sizeof loaded.why, "no CUDA driver (%s)",
                     e ? e : GPU_DRIVER_LIB " not found");
            return;
        }
        open_plugin(path);     /* the driver stays loaded: the plugin's cudart needs it */
        return;
    }
    if (find_beside(exe_dir, GPU_PLUGIN_EMU_FILE, path, sizeof path)) {
        open_plugin(path);
        return;
    }
    snprintf(loaded.why, sizeof loaded.why, "no GPU plugin (%s is neither in %s nor in "
             "%s/../lib/tokentop; build it with make CUDA=1 where nvcc is installed, or name one "
             "with %s)", GPU_PLUGIN_FILE, exe_dir ? exe_dir : "the binary's directory",
             exe_dir ? exe_dir : "", GPU_PLUGIN_ENV);
}

const gpu_plugin *gpu_plugin_load(const char *exe_dir, char *why, size_t cap)
{
    if (!loaded.tried) {
        loaded.tried = true;
        load(exe_dir);
    }
    if (!loaded.table && why && cap)
        snprintf(why, cap, "%s", loaded.why);
    return loaded.table;
}

const char *gpu_plugin_path(void)
{
    return loaded.path;
}
