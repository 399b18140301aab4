/* attn_json.c: the attention lists of generate --json --attention (attn_json.h). */
#include "app/attn_json.h"

#include <stdlib.h>

#include "app/cli.h"
#include "core/base/jsonw.h"
#include "core/base/text.h"
#include "core/engine/engine.h"
#include "core/tokenizer/tokenizer.h"

/* [{"pos":P,"token":T,"w":W},...] of the k most attended keys of w (the view's n weights). */
static void write_list(FILE *f, const session *s, const attention_view *v, const float *w, int k)
{
    int idx[ATTN_JSON_TOP];
    float val[ATTN_JSON_TOP];
    int m = attention_view_top(v, w, k, idx, val);
    fputc('[', f);
    for (int i = 0; i < m; i++) {
        size_t nb = 0;
        const char *b = tokenizer_token_bytes(s->tok, v->tokens[idx[i] - v->first], &nb);
        char buf[512];
        size_t len = text_token_display(b ? b : "", b ? nb : 0, TEXT_ESCAPE_BYTES, buf, sizeof buf);
        fprintf(f, "%s{\"pos\":%d,\"token\":", i ? "," : "", idx[i]);
        jsonw_string(f, buf, len);
        fputs(",\"w\":", f);
        jsonw_number(f, val[i]);
        fputc('}', f);
    }
    fputc(']', f);
}

void attn_json_record(FILE *f, session *s, const session_event *ev, int mode, attention_view *v)
{
    const char *key = mode == CLI_ATTENTION_LAYERS ? "attention_layers" : "attention";
    tt_error err;
    if (!s->eng->attention)
        engine_set_attention(s->eng, true, &err);   /* out of memory: the records say null */
    float *w = NULL;
    if (!attention_view_take_event(v, s, ev) || !(w = malloc((size_t)v->n * sizeof *w))) {
        fprintf(f, ",\"%s\":null", key);
        return;
    }
    fprintf(f, ",\"%s\":", key);
    if (mode != CLI_ATTENTION_LAYERS) {
        attention_view_mean(v, -1, -1, w);
        write_list(f, s, v, w, ATTN_JSON_TOP);
    } else {
        fputc('[', f);
        for (int l = 0; l < v->L; l++) {
            if (l)
                fputc(',', f);
            attention_view_mean(v, l, -1, w);
            write_list(f, s, v, w, ATTN_JSON_LAYER_TOP);
        }
        fputc(']', f);
    }
    free(w);
}
