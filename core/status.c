/* status.c: status names and error-message helpers. */
#include "core/status.h"

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
    char tmp[2 * TT_ERROR_MAX];
    snprintf(tmp, sizeof tmp, "%s: %s", prefix, err->msg);
    snprintf(err->msg, sizeof err->msg, "%s", tmp);
}
