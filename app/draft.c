/* draft.c: loading a draft model next to its target, refusing mismatched pairs. */
#include "app/draft.h"

#include <stdlib.h>
#include <string.h>

tt_dtype draft_default_dtype(const model *draft, bool cpu)
{
    if (cpu)
        return TT_Q8;
    const tt_dtype d = cli_default_dtype(draft, true);
    return d == TT_F32 ? TT_F16 : d;
}

tt_dtype draft_dtype(const model *draft, const cli_options *o, bool cpu)
{
    return o->dtype_set ? o->dtype : draft_default_dtype(draft, cpu);
}

tt_status draft_load(draft_app *d, const char *dir, const cli_app *target, const cli_options *o,
                     tt_error *err)
{
    memset(d, 0, sizeof *d);
    tt_status st = tokenizer_load_dir(dir, &d->tok, err);
    if (st != TT_OK)
        goto fail;
    if (!tokenizer_equal(d->tok, target->tok)) {
        st = tt_fail(err, TT_ERR_CONFIG, "draft model %s: its tokenizer differs from the target "
                     "%s's (vocabulary, special tokens and merges must be identical for "
                     "speculative decoding)", dir, cli_model_dir(o));
        goto fail;
    }
    if ((st = model_load(dir, &d->model, err)) != TT_OK)
        goto fail;
    const model_config *dc = &d->model->config, *tc = &target->model->config;
    if (dc->V != tc->V) {
        st = tt_fail(err, TT_ERR_CONFIG, "draft model %s: config.json: vocab_size %d differs from "
                     "the target's %d", dir, dc->V, tc->V);
        goto fail;
    }
    int n_ctx = target->eng->n_ctx;
    if (dc->maxT < n_ctx) {
        st = tt_fail(err, TT_ERR_CONFIG, "draft model %s: config.json: n_positions %d is shorter "
                     "than the target's context of %d (use --ctx %d)", dir, dc->maxT, n_ctx,
                     dc->maxT);
        goto fail;
    }
    cli_options eo = *o;
    eo.n_ctx = n_ctx;
    /* a draft beside a CPU target (chosen, or fallen back to) runs on the CPU too */
    bool cpu = target->eng->threads > 0;
    if (cpu)
        eo.backend = "cpu";
    eo.dtype = draft_dtype(d->model, o, cpu);
    eo.dtype_set = true;
    char note[256] = "";
    if ((st = cli_create_engine(d->model, &eo, &d->eng, note, sizeof note, err)) != TT_OK)
        goto fail;
    if (!(d->dir = strdup(dir))) {
        st = tt_fail(err, TT_ERR_NOMEM, "draft model %s: out of memory", dir);
        goto fail;
    }
    return TT_OK;
fail:
    draft_free(d);
    return st;
}

void draft_free(draft_app *d)
{
    engine_free(d->eng);
    model_free(d->model);
    tokenizer_free(d->tok);
    free(d->dir);
    memset(d, 0, sizeof *d);
}
