/* text.h: UTF-8 helpers for showing token bytes: validation and a display form that is always
 * valid UTF-8 (tokens may hold part of a character). */
#ifndef TOKENTOP_TEXT_H
#define TOKENTOP_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the valid UTF-8 sequence at s[0..n), or 0 when the bytes there are not a
 * complete valid sequence (overlongs, surrogates and code points above U+10FFFF are invalid). */
int text_utf8_seq_len(const unsigned char *s, size_t n);

/* Decodes the valid sequence at s (see text_utf8_seq_len) into *cp; returns its length or 0. */
int text_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Writes the UTF-8 form of cp (<= U+10FFFF) into out (4 bytes of room, not NUL-terminated) and
 * returns its length, 1..4. */
int text_utf8_encode(uint32_t cp, char *out);

enum {
    TEXT_ESCAPE_BYTES = 0,        /* only bytes outside complete characters become \xNN */
    TEXT_ESCAPE_WHITESPACE = 1,   /* also: newline -> \n, tab -> \t, CR -> \r, other controls
                                     -> \xNN, a leading space -> U+2423 (open box) */
};

/* Writes the display form of token bytes into out (NUL-terminated, truncated to cap) and returns
 * its length. Bytes that are not part of a complete valid UTF-8 character appear as "\xNN". */
size_t text_token_display(const char *bytes, size_t n, int flags, char *out, size_t cap);

#endif
