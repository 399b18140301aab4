/* gen_compare.c: generate's --compare-dtype (gen_compare.h). */
#include "app/gen_compare.h"

#include <string.h>

#include "core/base/jsonw.h"

tt_status gen_compare_open(gen_compare *g, const model *m, const cli_options *o,
                           const engine *ref, tt_error *err)
{
    memset(g, 0, sizeof *g);
    if (o->compare_dtype == ref->dtype)
        return tt_fail(err, TT_ERR_ARG, "--compare-dtype %s: the engine holds %s weights "
                       "already; compare with another precision",
                       tt_dtype_name(o->compare_dtype), tt_dtype_name(ref->dtype));
    return cli_create_engine_like(m, o, ref, o->compare_dtype, &g->eng, err);
}

void gen_compare_close(gen_compare *g)
{
    engine_free(g->eng);
    g->eng = NULL;
}

tt_status gen_compare_event(gen_compare *g, const session *s, const session_event *ev,
                            tt_error *err)
{
    g->have_last = false;
    if (!g->eng || ev->flush || ev->rejected || !ev->snap || !ev->logits)
        return TT_OK;
    int n = s->n_tokens - 1 - s->window_start;   /* the tokens before this one */
    tt_status st = dtype_compare_at(g->eng, s->tokens + s->window_start, n, ev->logits,
                                    s->eng->dtype, ev->snap, &g->last, err);
    if (st != TT_OK)
        return st;
    g->have_last = true;
    g->positions++;
    g->agree += g->last.top1_agree;
    g->kl_sum += g->last.kl;
    if (g->last.kl > g->kl_max)
        g->kl_max = g->last.kl;
    if (g->last.max_dp > g->max_dp)
        g->max_dp = g->last.max_dp;
    return TT_OK;
}

void gen_compare_json_record(FILE *f, const gen_compare *g, int32_t token)
{
    if (!g->have_last)
        return;
    const dtype_compare *c = &g->last;
    fprintf(f, ",\"compare\":{\"dtype\":\"%s\",\"raw_p\":", tt_dtype_name(c->dtype));
    float q = 0;
    for (int i = 0; i < c->n_top; i++)
        if (c->top_id[i] == token)
            q = c->top_q[i];
    jsonw_number(f, q);
    fputs(",\"kl\":", f);
    jsonw_number(f, c->kl);
    fputs(",\"max_dp\":", f);
    jsonw_number(f, c->max_dp);
    fprintf(f, ",\"max_dp_id\":%d,\"top1\":{\"id\":%d,\"raw_p\":", (int)c->max_dp_id,
            (int)c->top1_cmp);
    jsonw_number(f, c->top1_cmp_p);
    fprintf(f, "},\"top1_agree\":%s,\"top\":[", c->top1_agree ? "true" : "false");
    for (int i = 0; i < c->n_top; i++) {
        fprintf(f, "%s{\"id\":%d,\"raw_p\":", i ? "," : "", (int)c->top_id[i]);
        jsonw_number(f, c->top_q[i]);
        fputc('}', f);
    }
    fputs("]}", f);
}

void gen_compare_summary(FILE *f, const gen_compare *g, bool json)
{
    if (!g->eng)
        return;
    double n = g->positions > 0 ? (double)g->positions : 1.0;
    const char *d = tt_dtype_name(g->eng->dtype);
    if (!json) {
        fprintf(f, "[compared with %s: %ld positions | top-1 agreement %.1f%% | mean KL %.3g nats "
                "(max %.3g) | max |dp| %.4f]\n", d, g->positions, 100.0 * g->agree / n,
                g->kl_sum / n, g->kl_max, (double)g->max_dp);
        return;
    }
    fprintf(f, ",\"compare\":{\"dtype\":\"%s\",\"positions\":%ld,\"top1_agreement\":", d,
            g->positions);
    jsonw_number(f, g->agree / n);
    fputs(",\"mean_kl\":", f);
    jsonw_number(f, g->kl_sum / n);
    fputs(",\"max_kl\":", f);
    jsonw_number(f, g->kl_max);
    fputs(",\"max_dp\":", f);
    jsonw_number(f, g->max_dp);
    fputc('}', f);
}
