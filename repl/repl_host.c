/* repl_host.c: the REPL's cmd_host: drafts, engines and models made from the command line's
 * options (repl_host.h). */
#include "repl/repl_host.h"

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
}

void repl_host_init(repl_host *h, cli_app *app, const cli_options *o, session *s, cmd_env *env)
{
    memset(h, 0, sizeof *h);
    h->app = app;
    h->o = o;
    h->s = s;
    h->env = env;
    h->services = (cmd_host){.load_draft = host_load_draft, .make_engine = host_make_engine,
                             .adopt_engine = host_adopt_engine,
                             .user = h};
    env->host = &h->services;
}

void repl_host_free(repl_host *h)
{
    if (h)
        draft_free(&h->draft);
}
