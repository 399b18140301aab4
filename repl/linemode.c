/* linemode.c: the scriptable REPL: stdin in, generated text out, commands still work. */
#include "repl/linemode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "repl/compare.h"
#include "ui/input.h"

typedef struct {
    FILE *out, *msg;
    bool ends_newline;
    pace_clock *pace;                  /* /pace, --pace: env's */
    volatile sig_atomic_t *interrupt;
} line_ctx;

static bool on_event(void *user, const session_event *ev)
{
    line_ctx *c = user;
    if (c->pace->rate > 0 && !ev->flush && !ev->rejected) {   /* line mode shows no drafts */
        pace_wait(c->pace, c->interrupt);   /* callback time: not in the decode speed */
        if (*c->interrupt)
            return false;
    }
    if (ev->context_shifted)
        fprintf(c->msg, "[context full: dropped the oldest %d tokens and re-prefilled the rest]\n",
                ev->shift_dropped);
    if (ev->text_len) {
        fwrite(ev->text, 1, ev->text_len, c->out);
        fflush(c->out);
    }
    return true;
}

/* Runs a generation; appends nothing to the conversation itself. Returns 1 on engine failure. */
static int generate(session *s, line_ctx *c, volatile sig_atomic_t *interrupt)
{
    tt_error err = {0};
    *interrupt = 0;
    pace_restart(c->pace);
    tt_status st = session_generate(s, on_event, c, &err);
    fputc('\n', c->out);
    fflush(c->out);
    if (s->last.stop == SESSION_STOP_INTERRUPTED)
        fprintf(c->msg, "[interrupted after %d tokens]\n", s->last.generated_tokens);
    else if (s->last.stop == SESSION_STOP_CONTEXT)
        fprintf(c->msg, "[the context is full]\n");
    *interrupt = 0;
    if (st != TT_OK) {
        fprintf(c->msg, "error: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static int send_text(session *s, line_ctx *c, const char *text, volatile sig_atomic_t *interrupt)
{
    size_t len = 0;
    char *t = cmd_prompt_text(s, text, &len);
    tt_error err = {0};
    if (!t || session_add_user_text(s, t, len, &err) != TT_OK) {
        fprintf(c->msg, "error: %s\n", t ? err.msg : "out of memory");
        free(t);
        return 1;
    }
    free(t);
    return generate(s, c, interrupt);
}

static bool line_stop(void *user)
{
    return *(volatile sig_atomic_t *)user != 0;
}

/* An armed /beam, /samples or /compare on a typed line: the columns go to out as text. */
static int run_compare(cmd_env *env, line_ctx *c, const char *text,
                       volatile sig_atomic_t *interrupt)
{
    *interrupt = 0;
    compare_hooks h = {.stop = line_stop, .user = (void *)interrupt};
    int flags = compare_run(env, text, &h);
    *interrupt = 0;
    if (!(flags & CMD_ERROR))
        compare_print(compare_cmd_of(env), c->out);
    if (env->out_len)
        fprintf(c->msg, "%s\n", env->out);
    fflush(c->msg);
    return 0;
}

/* Returns -1 to quit, else 0 or 1 (failure). */
static int handle(session *s, cmd_env *env, line_ctx *c, const char *text,
                  volatile sig_atomic_t *interrupt)
{
    const compare_state *cmp = compare_cmd_of(env);
    if (!cmd_is_command(text) && cmp && cmp->pending != COMPARE_NONE)
        return run_compare(env, c, text, interrupt);
    if (!cmd_is_command(text))
        return send_text(s, c, text, interrupt);
    int flags = cmd_execute(env, text);
    if (env->out_len)
        fprintf(c->msg, "%s\n", env->out);
    fflush(c->msg);
    if (flags & CMD_QUIT)
        return -1;
    if (flags & CMD_GENERATE)
        return generate(s, c, interrupt);
    return 0;
}

int linemode_run(session *s, cmd_env *env, const char *first, FILE *in, FILE *out, FILE *msg,
                 volatile sig_atomic_t *interrupt, volatile sig_atomic_t *quit)
{
    line_ctx c = {.out = out, .msg = msg, .pace = &env->pace, .interrupt = interrupt};
    env->line_mode = true;
    bool prompt = isatty(fileno(in));
    int rc = 0, ctrl_c = 0;
    ui_input buf;
    ui_input_init(&buf);
    if (first) {
        int r = handle(s, env, &c, first, interrupt);
        if (r < 0)
            goto done;
        rc |= r;
    }
    char *line = NULL;
    size_t cap = 0;
    while (!*quit) {
        if (prompt) {
            fputs(buf.multiline ? "... " : ">>> ", msg);
            fflush(msg);
        }
        errno = 0;
        ssize_t n = getline(&line, &cap, in);
        if (n < 0) {
            if (errno == EINTR && !*quit) {   /* Ctrl-C at the prompt: twice quits */
                clearerr(in);
                *interrupt = 0;
                if (++ctrl_c >= 2)
                    break;
                fputs("\n(Ctrl-C again to quit)\n", msg);
                ui_input_clear(&buf);
                continue;
            }
            break;
        }
        ctrl_c = 0;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        ui_input_set(&buf, line);
        char *text = ui_input_enter(&buf);
        if (!text)
            continue;
        int r = handle(s, env, &c, text, interrupt);
        free(text);
        if (r < 0)
            break;
        rc |= r;
    }
    free(line);
done:
    ui_input_free(&buf);
    return rc;
}
