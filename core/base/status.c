/* status.c: status names and error-message helpers. */
#include "core/base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *tt_status_str(tt_status s)
{
    switch (s) {
    case TT_OK: return "ok";
    case TT_ERR_IO: return "i/o error";
    case TT_ERR_FORMAT: return "format error";
    case TT_ERR_CONFIG: return "config error";
    case TT_ERR_ARG: return "invalid argument";
    case TT_ERR_NOMEM: return "out of memory";
    case TT_ERR_NUMERIC: return "numeric error";
    case TT_ERR_CONTEXT: return "context full";
    case TT_ERR_UNSUPPORTED: return "unsupported";
    case TT_ERR_DEVICE: return "device error";
    case TT_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

tt_status tt_fail(tt_error *err, tt_status s, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = s;
    }
    return s;
}

void tt_error_prefix(tt_error *err, const char *prefix)
{
    if (!err || !prefix)
        return;
    /* Shift the message right and put "prefix: " before it, truncating at the buffer's end. */
    size_t pl = strlen(prefix), ml = strnlen(err->msg, sizeof err->msg - 1);
    size_t head = pl + 2 < sizeof err->msg - 1 ? pl + 2 : sizeof err->msg - 1;
    size_t keep = ml < sizeof err->msg - 1 - head ? ml : sizeof err->msg - 1 - head;
    memmove(err->msg + head, err->msg, keep);
    memcpy(err->msg, prefix, head < pl ? head : pl);
    if (head == pl + 2) {
        err->msg[pl] = ':';
        err->msg[pl + 1] = ' ';
    }
    err->msg[head + keep] = 0;
}
