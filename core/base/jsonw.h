/* jsonw.h: the few JSON writing helpers the --json outputs need. */
#ifndef TOKENTOP_JSONW_H
#define TOKENTOP_JSONW_H

#include <stddef.h>
#include <stdio.h>

/* Writes s[0..n) as a quoted JSON string. s must be valid UTF-8 (see text_token_display);
 * quotes, backslashes and control characters are escaped. */
void jsonw_string(FILE *f, const char *s, size_t n);

/* Writes a number with 6 significant digits; NaN and infinities become null. */
void jsonw_number(FILE *f, double v);

#endif
