/* history.c: input history in memory and in its file. */
#include "repl/history.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/util.h"

void history_init(history *h, const char *path, int max)
{
    memset(h, 0, sizeof *h);
    h->max = max > 0 ? max : HISTORY_MAX;
    h->path = path ? strdup(path) : NULL;
}

void history_free(history *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->n; i++)
        free(h->items[i]);
    free(h->items);
    free(h->path);
    free(h->draft);
    memset(h, 0, sizeof *h);
}

char *history_escape(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(2 * n + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\') {
            o[k++] = '\\';
            o[k++] = '\\';
        } else if (s[i] == '\n') {
            o[k++] = '\\';
            o[k++] = 'n';
        } else {
            o[k++] = s[i];
        }
    }
    o[k] = 0;
    return o;
}

char *history_unescape(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n && (s[i + 1] == '\\' || s[i + 1] == 'n')) {
            o[k++] = s[i + 1] == 'n' ? '\n' : '\\';
            i++;
        } else {
            o[k++] = s[i];
        }
    }
    o[k] = 0;
    return o;
}

/* Takes ownership of entry. */
static bool push(history *h, char *entry)
{
    if (!UTIL_RESERVE(h->items, &h->cap, (size_t)h->n + 1, 64)) {
        free(entry);
        return false;
    }
    h->items[h->n++] = entry;
    if (h->n > h->max) {
        free(h->items[0]);
        memmove(h->items, h->items + 1, (size_t)(h->n - 1) * sizeof *h->items);
        h->n--;
    }
    return true;
}

static void restart_browsing(history *h)
{
    h->pos = h->n;
    free(h->draft);
    h->draft = NULL;
}

static tt_status rewrite(history *h, tt_error *err)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", h->path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return tt_fail(err, TT_ERR_IO, "%s: %s", tmp, strerror(errno));
    for (int i = 0; i < h->n; i++) {
        char *e = history_escape(h->items[i]);
        if (e)
            fprintf(f, "%s\n", e);
        free(e);
    }
    if (fclose(f) != 0 || rename(tmp, h->path) != 0) {
        remove(tmp);
        return tt_fail(err, TT_ERR_IO, "%s: could not rewrite", h->path);
    }
    return TT_OK;
}

tt_status history_load(history *h, tt_error *err)
{
    if (!h->path)
        return TT_OK;
    FILE *f = fopen(h->path, "r");
    if (!f) {
        if (errno == ENOENT)
            return TT_OK;
        return tt_fail(err, TT_ERR_IO, "%s: %s", h->path, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int read = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = 0;
        if (len == 0)
            continue;
        char *e = history_unescape(line);
        if (!e || !push(h, e))
            break;
        read++;
    }
    free(line);
    fclose(f);
    restart_browsing(h);
    if (read > h->n)
        return rewrite(h, err);
    return TT_OK;
}

/* mkdir -p of the directory holding path. */
static void make_parent_dirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        mkdir(buf, 0700);
        *p = '/';
    }
}

tt_status history_add(history *h, const char *line, tt_error *err)
{
    restart_browsing(h);
    if (!line[0] || (h->n > 0 && strcmp(h->items[h->n - 1], line) == 0))
        return TT_OK;
    char *copy = strdup(line);
    if (!copy || !push(h, copy))
        return tt_fail(err, TT_ERR_NOMEM, "history: out of memory");
    h->pos = h->n;
    if (!h->path)
        return TT_OK;
    make_parent_dirs(h->path);
    FILE *f = fopen(h->path, "a");
    if (!f)
        return tt_fail(err, TT_ERR_IO, "%s: %s", h->path, strerror(errno));
    char *e = history_escape(line);
    if (e)
        fprintf(f, "%s\n", e);
    free(e);
    if (fclose(f) != 0)
        return tt_fail(err, TT_ERR_IO, "%s: write error", h->path);
    return TT_OK;
}

const char *history_prev(history *h, const char *current)
{
    if (h->pos <= 0)
        return NULL;
    if (h->pos == h->n) {
        free(h->draft);
        h->draft = strdup(current ? current : "");
    }
    h->pos--;
    return h->items[h->pos];
}

const char *history_next(history *h)
{
    if (h->pos >= h->n)
        return NULL;
    h->pos++;
    if (h->pos == h->n)
        return h->draft ? h->draft : "";
    return h->items[h->pos];
}

char *history_default_path(void)
{
    const char *env = getenv("TOKENTOP_HISTORY");
    if (env)
        return *env ? strdup(env) : NULL;
    char buf[4096];
    const char *state = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    if (state && state[0] == '/')
        snprintf(buf, sizeof buf, "%s/tokentop/history", state);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.local/state/tokentop/history", home);
    else
        return NULL;
    return strdup(buf);
}
