/* gen_compare.h: `generate --compare-dtype T`: a second engine at precision T runs the tokens of
 * the generation, and every --json record carries how the distribution it was drawn from differs
 * there (core/decode/dtype_compare.h); the summary carries the figures over the whole run. */
#ifndef TOKENTOP_GEN_COMPARE_H
#define TOKENTOP_GEN_COMPARE_H

#include <stdbool.h>
#include <stdio.h>

#include "app/cli.h"
#include "core/decode/dtype_compare.h"
#include "core/session/session.h"

typedef struct {
    engine *eng;               /* the comparison engine, owned; NULL when closed */
    dtype_compare last;        /* the last event's comparison */
    bool have_last;            /* last describes the event being reported */
    long positions, agree;     /* positions compared, of them with the same argmax */
    double kl_sum, kl_max;
    float max_dp;
} gen_compare;

/* Makes the comparison engine for o->compare_dtype on ref's backend and n_ctx. Fails (nothing
 * made, the reason in err) when the precision is ref's own or the backend cannot hold it. */
tt_status gen_compare_open(gen_compare *g, const model *m, const cli_options *o,
                           const engine *ref, tt_error *err);
void gen_compare_close(gen_compare *g);   /* a zeroed or closed g is safe */

/* For a generated token's event (the token already appended to s): runs the comparison of the
 * distribution it was drawn from and adds it to the totals. Events without logits (a flush,
 * speculative rounds) leave have_last false. */
tt_status gen_compare_event(gen_compare *g, const session *s, const session_event *ev,
                            tt_error *err);

/* ,"compare":{...} for the record of token (nothing when have_last is false): "dtype", "raw_p"
 * (the token's p under the comparison), "kl", "max_dp", "max_dp_id", "top1" {"id", "raw_p"},
 * "top1_agree", "top" [{"id", "raw_p"}] in the order of the record's own "top". */
void gen_compare_json_record(FILE *f, const gen_compare *g, int32_t token);

/* ,"compare":{"dtype", "positions", "top1_agreement", "mean_kl", "max_kl", "max_dp"} for the
 * summary object; the same as one line for people with json false. */
void gen_compare_summary(FILE *f, const gen_compare *g, bool json);

#endif
