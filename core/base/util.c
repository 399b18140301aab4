/* util.c: whole-file reads, path joining, JSON type names, strict integer parsing. */
#include "core/base/util.h"

#include <cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

tt_status util_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                         bool *missing, tt_error *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    if (missing)
        *missing = false;
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        int e = errno;
        if (missing)
            *missing = e == ENOENT;
        return tt_fail(err, TT_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    tt_status s = TT_OK;
    size_t cap = 4096, n = 0;
    if (max_bytes > 0) {
        struct stat st;
        if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
            s = tt_fail(err, TT_ERR_IO, "%s: not a regular file", path);
        else if ((unsigned long long)st.st_size > max_bytes)
            s = tt_fail(err, TT_ERR_FORMAT, "%s: %lld bytes is more than the %zu this file may "
                        "hold", path, (long long)st.st_size, max_bytes);
        else
            cap = (size_t)st.st_size + 2;     /* one short read finds the end */
    }
    char *buf = NULL;
    if (s == TT_OK && !(buf = malloc(cap)))
        s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", path);
    while (s == TT_OK) {
        if (!util_reserve(&buf, &cap, n + 2, cap)) {   /* room to read and for the NUL */
            s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, n);
            break;
        }
        size_t want = cap - n - 1;
        size_t got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want)                       /* end of file, or an error (ferror below) */
            break;
    }
    if (s == TT_OK && ferror(f))
        s = tt_fail(err, TT_ERR_IO, "%s: read error: %s", path, strerror(errno ? errno : EIO));
    if (s == TT_OK && max_bytes > 0 && n > max_bytes)   /* it grew while being read */
        s = tt_fail(err, TT_ERR_FORMAT, "%s: more than the %zu bytes this file may hold", path,
                    max_bytes);
    if (!is_stdin)
        fclose(f);
    if (s != TT_OK) {
        free(buf);
        return s;
    }
    buf[n] = 0;
    *out = buf;
    if (len)
        *len = n;
    return TT_OK;
}

tt_status util_map_file(const char *path, void **map, size_t *len, tt_error *err)
{
    *map = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tt_fail(err, TT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    tt_status s = TT_OK;
    if (fstat(fd, &st) != 0)
        s = tt_fail(err, TT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = tt_fail(err, TT_ERR_IO, "%s: not a regular file", path);
    else if (st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            s = tt_fail(err, TT_ERR_IO, "%s: cannot map %zu bytes: %s", path,
                        (size_t)st.st_size, strerror(errno));
        } else {
            *map = m;
            *len = (size_t)st.st_size;
        }
    }
    close(fd);
    return s;
}

char *util_path_join(const char *dir, const char *file)
{
    size_t a = strlen(dir), b = strlen(file);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, file, b + 1);
    return p;
}

const char *util_json_type_name(const cJSON *j)
{
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "invalid JSON";
}

util_parse_result util_parse_long(const char *s, long lo, long hi, long *out)
{
    if (!s)
        return UTIL_PARSE_NOT_INTEGER;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0')
        return UTIL_PARSE_NOT_INTEGER;
    if (errno == ERANGE || v < lo || v > hi)
        return UTIL_PARSE_OUT_OF_RANGE;
    *out = v;
    return UTIL_PARSE_OK;
}

int util_argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

bool util_reserve_items(void *items, size_t *cap, size_t need, size_t initial, size_t item_size)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : initial;
    while (c < need && c <= SIZE_MAX / 2)
        c *= 2;
    if (c < need || c > SIZE_MAX / item_size)
        return false;
    /* items points at a pointer to some object type: it is copied in and out as bytes (every
     * object pointer has void *'s representation on the platforms tokentop builds for), so any
     * element type works without a cast at each caller and without aliasing it as void *. */
    void *old;
    memcpy(&old, items, sizeof old);
    void *b = realloc(old, c * item_size);
    if (!b)
        return false;
    memcpy(items, &b, sizeof b);
    *cap = c;
    return true;
}

bool util_reserve(char **buf, size_t *cap, size_t need, size_t initial)
{
    return util_reserve_items(buf, cap, need, initial, 1);
}
