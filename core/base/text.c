/* text.c: UTF-8 validation and the display form of token bytes. */
#include "core/base/text.h"

#include <stdio.h>
#include <string.h>

int text_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) { *cp = c; return 1; }
    else if ((c & 0xe0) == 0xc0) { len = 2; v = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { len = 3; v = c & 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if ((size_t)len > n)
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

int text_utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

int text_utf8_seq_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    return text_utf8_decode(s, n, &cp);
}

size_t text_token_display(const char *bytes, size_t n, int flags, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    const unsigned char *s = (const unsigned char *)bytes;
    size_t o = 0;
    char tmp[8];
    for (size_t i = 0; i < n;) {
        int len = text_utf8_seq_len(s + i, n - i);
        const char *piece;
        size_t plen;
        if (len == 0) {
            snprintf(tmp, sizeof tmp, "\\x%02X", s[i]);
            piece = tmp;
            plen = 4;
            len = 1;
        } else if ((flags & TEXT_ESCAPE_WHITESPACE) && len == 1 && (s[i] < 0x20 || s[i] == 0x7f)) {
            if (s[i] == '\n') piece = "\\n";
            else if (s[i] == '\t') piece = "\\t";
            else if (s[i] == '\r') piece = "\\r";
            else { snprintf(tmp, sizeof tmp, "\\x%02X", s[i]); piece = tmp; }
            plen = strlen(piece);
        } else if ((flags & TEXT_ESCAPE_WHITESPACE) && i == 0 && s[i] == ' ') {
            piece = "\xe2\x90\xa3";   /* U+2423 OPEN BOX marks a leading space */
            plen = 3;
        } else {
            piece = bytes + i;
            plen = (size_t)len;
        }
        if (o + plen >= cap)
            break;
        memcpy(out + o, piece, plen);
        o += plen;
        i += (size_t)len;
    }
    out[o] = 0;
    return o;
}
