/* repl_host.c: the REPL's cmd_host: drafts, engines and models made from the command line's
 * options (repl_host.h). */
#include "repl/repl_host.h"

#include <stdlib.h>
#include <string.h>

tt_status repl_host_load_draft(repl_host *h, const char *dir, tt_error *err)
{
    draft_app d;
    tt_status st = draft_load(&d, dir, h->app, h->o, err);
    if (st != TT_OK)
        return st;
    session_set_draft(h->s, NULL, NULL);
    if ((st = session_set_draft(h->s, d.eng, err)) != TT_OK) {
        draft_free(&d);
        if (h->draft.eng)
            session_set_draft(h->s, h->draft.eng, NULL);
        return st;
    }
    draft_free(&h->draft);
    h->draft = d;
    h->env->draft_dir = h->draft.dir;
    return TT_OK;
}

static tt_status host_load_draft(void *user, const char *dir, tt_error *err)
{
    return repl_host_load_draft(user, dir, err);
}

/* cmd_host.make_engine (cli_create_engine_like). */
static tt_status host_make_engine(void *user, tt_dtype d, engine **out, tt_error *err)
{
    repl_host *h = user;
    return cli_create_engine_like(h->app->model, h->o, h->s->eng, d, out, err);
}

/* cmd_host.adopt_engine: the session runs on now; the app owns it (and the CPU fall-back after a
 * GPU error keeps its precision). */
static void host_adopt_engine(void *user, engine *old, engine *now)
{
    repl_host *h = user;
    if (h->app->eng == old) {
        engine_free(old);
        h->app->eng = now;
    }
    h->app->eopts.dtype = now->dtype;
    h->dtype_chosen = true;
}

/* The draft again against the new target (the session detached it): kept when it fits, with
 * speculative decoding as it was, else freed; notes say which. */
static void reattach_draft(repl_host *h, const cli_options *o, bool spec_on, char *notes,
                           size_t cap)
{
    char *dir = h->draft.dir ? strdup(h->draft.dir) : NULL;
    draft_free(&h->draft);
    h->env->draft_dir = NULL;
    if (!dir)
        return;
    draft_app d;
    tt_error err = {0};
    if (draft_load(&d, dir, h->app, o, &err) == TT_OK) {
        if (session_set_draft(h->s, d.eng, &err) == TT_OK) {
            h->draft = d;
            h->env->draft_dir = h->draft.dir;
            session_set_speculative(h->s, spec_on, NULL);
            cli_notes_add(notes, cap, "draft model %s kept: it fits the new model", dir);
            free(dir);
            return;
        }
        draft_free(&d);
    }
    cli_notes_add(notes, cap, "%s; the draft is detached (/draft DIR loads one that fits)",
                  err.msg);
    free(dir);
}

tt_status repl_host_load_model(repl_host *h, const char *ref, char *notes, size_t notes_cap,
                               tt_error *err)
{
    session *s = h->s;
    if (notes_cap)
        notes[0] = 0;
    if (s->gen)
        return tt_fail(err, TT_ERR_ARG, "%s: not while a generation is open", ref);
    cli_options o = *h->o;
    o.model_dir = ref;
    o.backend = s->eng->ops->name;   /* where the session runs now (auto's choice, a fall-back) */
    if (h->dtype_chosen) {
        o.dtype = s->eng->dtype;
        o.dtype_set = true;
    }
    if (o.chat_template && strcmp(o.chat_template, "off") != 0)
        o.chat_template = NULL;      /* a format named for the old model: the new one's decides */
    cli_app next;
    tt_status st = cli_app_open(&next, &o, false, notes, notes_cap, err);
    if (st != TT_OK)
        return st;
    bool spec_on = s->spec_on;
    if ((st = session_set_model(s, next.model, next.tok, next.eng, err)) != TT_OK) {
        cli_app_free(&next);
        return st;
    }
    /* The app keeps its place. A backend that could not hold the new model says why (and the
     * note stays); otherwise the note on the backend auto chose stays. */
    cli_app old = *h->app;
    if (next.backend_note[0])
        cli_notes_add(notes, notes_cap, "%s", next.backend_note);
    else
        memcpy(next.backend_note, old.backend_note, sizeof next.backend_note);
    memcpy(next.fallback_note, old.fallback_note, sizeof next.fallback_note);
    next.fallback_quiet = old.fallback_quiet;
    *h->app = next;
    cli_session_chat(h->app, s);
    reattach_draft(h, &o, spec_on, notes, notes_cap);
    cmd_env_model_changed(h->env);   /* before the old model goes: modules free what uses it */
    cli_app_free(&old);
    return TT_OK;
}

static tt_status host_load_model(void *user, const char *ref, char *notes, size_t notes_cap,
                                 tt_error *err)
{
    return repl_host_load_model(user, ref, notes, notes_cap, err);
}

void repl_host_init(repl_host *h, cli_app *app, const cli_options *o, session *s, cmd_env *env)
{
    memset(h, 0, sizeof *h);
    h->app = app;
    h->o = o;
    h->s = s;
    h->env = env;
    h->dtype_chosen = o->dtype_set;
    h->services = (cmd_host){.load_draft = host_load_draft, .make_engine = host_make_engine,
                             .adopt_engine = host_adopt_engine, .load_model = host_load_model,
                             .user = h};
    env->host = &h->services;
}

void repl_host_free(repl_host *h)
{
    if (h)
        draft_free(&h->draft);
}
