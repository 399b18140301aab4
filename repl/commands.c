/* commands.c: the slash-command table, its lookup and argument handling, and every handler (the
 * /save and /load file format is repl/session_file.c). */
#include "repl/commands.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/text.h"
#include "core/base/util.h"
#include "core/model/gguf.h"
#include "repl/session_file.h"
#include "ui/grid.h"

#define DEFAULT_BARS 10

/* ---------------------------------------------------------------------------------------------
 * Output */

static void out_vadd(cmd_env *e, const char *fmt, va_list ap0)
{
    va_list ap;
    va_copy(ap, ap0);
    char small[512];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (!util_reserve(&e->out, &e->out_cap, e->out_len + (size_t)n + 1, 1024))
        return;
    if ((size_t)n < sizeof small) {
        memcpy(e->out + e->out_len, small, (size_t)n + 1);
    } else {
        va_copy(ap, ap0);
        vsnprintf(e->out + e->out_len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    e->out_len += (size_t)n;
}

static void out_add(cmd_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_add(cmd_env *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    out_vadd(e, fmt, ap);
    va_end(ap);
}

void cmd_out(cmd_env *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    out_vadd(e, fmt, ap);
    va_end(ap);
}

static int fail_v(cmd_env *e, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    e->out_len = 0;
    out_add(e, "%s", msg);
    return CMD_ERROR;
}

static int fail(cmd_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(cmd_env *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = fail_v(e, fmt, ap);
    va_end(ap);
    return r;
}

int cmd_fail(cmd_env *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = fail_v(e, fmt, ap);
    va_end(ap);
    return r;
}

/* A value for messages: escaped the way the histogram shows tokens. */
static void show_text(const char *s, char *out, size_t cap)
{
    text_token_display(s, strlen(s), TEXT_ESCAPE_WHITESPACE, out, cap);
}

static void token_label(const session *s, int32_t id, char *out, size_t cap)
{
    tokenizer_token_display(s->tok, id, TEXT_ESCAPE_WHITESPACE, out, cap);
}

/* ---------------------------------------------------------------------------------------------
 * Lifetime */

/* The names /show and /save use, from the session's model and engine. */
static void describe_session(cmd_env *e)
{
    const session *s = e->s;
    e->model_name = s && s->model && s->model->name ? s->model->name : "model";
    e->model_dir = s && s->model && s->model->dir ? s->model->dir : "";
    e->engine_desc = s && s->eng ? s->eng->description : "";
    e->backend = s && s->eng && s->eng->ops ? s->eng->ops->name : "?";
}

void cmd_env_init(cmd_env *e, session *s)
{
    memset(e, 0, sizeof *e);
    e->s = s;
    e->bars = DEFAULT_BARS;
    e->pick_id = -1;
    describe_session(e);
    pace_init(&e->pace);
    if (s) {
        e->defaults = s->set.sampler;
        e->default_max_new = s->set.max_new_tokens;
    }
}

void cmd_env_free(cmd_env *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->n_modules; i++)
        if (e->modules[i]->env_free)
            e->modules[i]->env_free(e);
    for (int i = 0; i < e->n_modules; i++) {
        if (e->modules[i]->state_free)
            e->modules[i]->state_free(e->module_state[i]);
        e->module_state[i] = NULL;
    }
    free(e->out);
    e->out = NULL;
    e->out_len = e->out_cap = 0;
}

void cmd_env_model_changed(cmd_env *e)
{
    describe_session(e);
    e->hist.kind = UI_HIST_NONE;
    e->hist.has_draft = false;
    for (int i = 0; i < e->n_modules; i++)
        if (e->modules[i]->model_changed)
            e->modules[i]->model_changed(e);
}

/* Step mode keeps a generation open between key presses; edits of the past close it first. */
static void end_open_generation(cmd_env *e)
{
    if (e->s->gen)
        session_gen_end(e->s, SESSION_STOP_INTERRUPTED, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Parsing */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void cmd_free_args(char **argv, int argc)
{
    if (!argv)
        return;
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    free(argv);
}

int cmd_split_args(const char *s, char ***out, char *msg, size_t cap)
{
    size_t n = strlen(s);
    char **argv = calloc(n / 2 + 2, sizeof *argv);
    char *word = malloc(n + 1);
    int argc = 0;
    if (!argv || !word) {
        free(argv);
        free(word);
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    size_t i = 0;
    while (true) {
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i >= n)
            break;
        size_t w = 0;
        bool quoted = false;
        while (i < n && (quoted || (s[i] != ' ' && s[i] != '\t'))) {
            char c = s[i++];
            if (c == '"') {
                quoted = !quoted;
                continue;
            }
            if (c != '\\') {
                word[w++] = c;
                continue;
            }
            if (i >= n) {
                snprintf(msg, cap, "a backslash ends the line");
                goto bad;
            }
            char e = s[i++];
            switch (e) {
            case 'n': word[w++] = '\n'; break;
            case 't': word[w++] = '\t'; break;
            case 'r': word[w++] = '\r'; break;
            case '\\': word[w++] = '\\'; break;
            case '"': word[w++] = '"'; break;
            case ' ': word[w++] = ' '; break;
            case 'x': {
                int h1 = i < n ? hexval(s[i]) : -1, h2 = i + 1 < n ? hexval(s[i + 1]) : -1;
                if (h1 < 0 || h2 < 0 || (h1 == 0 && h2 == 0)) {
                    snprintf(msg, cap, "\\x needs two hex digits (not 00)");
                    goto bad;
                }
                word[w++] = (char)(h1 * 16 + h2);
                i += 2;
                break;
            }
            default:
                snprintf(msg, cap, "unknown escape \\%c (use \\n \\t \\r \\\\ \\\" \\xHH)", e);
                goto bad;
            }
        }
        if (quoted) {
            snprintf(msg, cap, "unterminated quote");
            goto bad;
        }
        argv[argc] = malloc(w + 1);
        if (!argv[argc]) {
            snprintf(msg, cap, "out of memory");
            goto bad;
        }
        memcpy(argv[argc], word, w);
        argv[argc][w] = 0;
        argc++;
    }
    free(word);
    *out = argv;
    return argc;
bad:
    free(word);
    cmd_free_args(argv, argc);
    return -1;
}

char *cmd_prompt_text(const session *s, const char *input, size_t *len)
{
    if (input[0] == '/' && input[1] == '/')
        input++;
    size_t n = strlen(input);
    bool newline = false;
    /* (in chat mode the format separates the turns) */
    if (n > 0 && s->n_tokens > 0 && !strchr(" \t\n\r", input[0])
        && session_chat_format(s) == CHAT_RAW) {
        int32_t last = s->tokens[s->n_tokens - 1];
        size_t nb = 0;
        const char *b = tokenizer_token_bytes(s->tok, last, &nb);
        newline = last != tokenizer_eot_id(s->tok) && b && nb > 0 &&
                  !strchr(" \t\n\r", b[nb - 1]);
    }
    char *out = malloc(n + 2);
    if (!out)
        return NULL;
    size_t o = 0;
    if (newline)
        out[o++] = '\n';
    memcpy(out + o, input, n);
    o += n;
    out[o] = 0;
    *len = o;
    return out;
}

bool cmd_is_command(const char *line)
{
    return line[0] == '/' && line[1] != '/';
}

/* Edit distance between a and b (insertions, deletions, substitutions), at most 32 bytes each
 * (longer: a large number). */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 32 || m > 32)
        return 99;
    int d[33][33];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

static int rows_in_order(const cmd_env *e, const cmd_entry **rows, int cap);

/* The command among e's rows (the table's and every module's) a mistyped name most likely meant:
 * within max_edits (names of 3+ letters), one that takes argc arguments first (argc < 0: any);
 * NULL when none is that close. not is skipped. */
#define ROWS_MAX 128
static const cmd_entry *closest_command(const cmd_env *e, const char *name, int argc,
                                        const cmd_entry *not, int max_edits)
{
    const cmd_entry *best = NULL, *rows[ROWS_MAX];
    int best_score = 1000, n = rows_in_order(e, rows, ROWS_MAX);
    if (strlen(name) < 3)
        return NULL;
    for (int i = 0; i < n; i++) {
        const cmd_entry *c = rows[i];
        if (c == not)
            continue;
        int dist = edit_distance(name, c->name);
        if (dist > max_edits)
            continue;
        bool fits = argc < 0 || (argc >= c->min_args && argc <= c->max_args);
        int score = dist + (fits ? 0 : 10);
        if (score < best_score) {
            best = c;
            best_score = score;
        }
    }
    return best_score < 10 || argc < 0 ? best : NULL;
}

/* The rows e knows, in table order (commands.c's table, then each module's); e may be NULL (the
 * table only). At most cap. */
static int rows_in_order(const cmd_env *e, const cmd_entry **rows, int cap)
{
    int n = 0;
    for (int i = 0; i < cmd_count && n < cap; i++)
        rows[n++] = &cmd_table[i];
    for (int m = 0; e && m < e->n_modules; m++)
        for (int i = 0; i < e->modules[m]->n_rows && n < cap; i++)
            rows[n++] = &e->modules[m]->rows[i];
    return n;
}

static const cmd_entry *lookup_in(const cmd_env *e, const char *name, char *msg, size_t cap)
{
    const cmd_entry *rows[ROWS_MAX];
    int n = rows_in_order(e, rows, ROWS_MAX);
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i]->name, name) == 0 || (rows[i]->alias && strcmp(rows[i]->alias, name) == 0))
            return rows[i];
    size_t len = strlen(name);
    const cmd_entry *found = NULL;
    int matches = 0;
    for (int i = 0; i < n && len > 0; i++)
        if (strncmp(rows[i]->name, name, len) == 0) {
            found = rows[i];
            matches++;
        }
    if (matches == 1)
        return found;
    if (matches == 0) {
        const cmd_entry *near = closest_command(e, name, -1, NULL, strlen(name) >= 4 ? 2 : 1);
        if (near)
            snprintf(msg, cap, "Unknown command '/%s'. Did you mean /%s? (/help lists them)", name,
                     near->name);
        else
            snprintf(msg, cap, "Unknown command '/%s'. Type /help.", name);
        return NULL;
    }
    size_t o = (size_t)snprintf(msg, cap, "ambiguous command: /%s, could be:", name);
    int k = 0;
    for (int i = 0; i < n && o < cap; i++)
        if (strncmp(rows[i]->name, name, len) == 0)
            o += (size_t)snprintf(msg + o, cap - o, "%s /%s", k++ ? "," : "", rows[i]->name);
    return NULL;
}

const cmd_entry *cmd_lookup(const char *name, char *msg, size_t cap)
{
    return lookup_in(NULL, name, msg, cap);
}

const cmd_entry *cmd_env_lookup(const cmd_env *e, const char *name, char *msg, size_t cap)
{
    return lookup_in(e, name, msg, cap);
}

bool cmd_env_add_module(cmd_env *e, const cmd_module *m)
{
    for (int i = 0; i < e->n_modules; i++)
        if (e->modules[i] == m)
            return true;
    if (e->n_modules >= CMD_MODULES_MAX)
        return false;
    void *state = NULL;
    if (m->state_create && !(state = m->state_create()))
        return false;
    e->module_state[e->n_modules] = state;
    e->modules[e->n_modules++] = m;
    return true;
}

void *cmd_env_state(const cmd_env *e, const cmd_module *m)
{
    for (int i = 0; e && i < e->n_modules; i++)
        if (e->modules[i] == m)
            return e->module_state[i];
    return NULL;
}

/* A row's group; a value out of range counts as none. */
static int group_of(const cmd_entry *c)
{
    int g = (int)c->group;
    return g > 0 && g < CMD_GROUP_COUNT ? g : CMD_GROUP_NONE;
}

int cmd_env_list(const cmd_env *e, const cmd_entry **rows, int cap)
{
    const cmd_entry *all[ROWS_MAX];
    int n = rows_in_order(e, all, ROWS_MAX), k = 0;
    for (int g = 0; g < CMD_GROUP_COUNT; g++)
        for (int i = 0; i < n; i++)
            if (group_of(all[i]) == g) {
                if (k < cap)
                    rows[k] = all[i];
                k++;
            }
    return k;
}

const char *cmd_group_name(cmd_group g)
{
    static const char *const names[CMD_GROUP_COUNT] = {
        [CMD_GROUP_NONE] = "",
        [CMD_GROUP_SAMPLER] = "sampler",
        [CMD_GROUP_GENERATION] = "generation",
        [CMD_GROUP_SPECULATIVE] = "speculative",
        [CMD_GROUP_COMPARE] = "compare",
        [CMD_GROUP_SESSION] = "session",
        [CMD_GROUP_DISPLAY] = "display",
    };
    return (int)g >= 0 && g < CMD_GROUP_COUNT ? names[g] : "";
}

int cmd_execute(cmd_env *e, const char *line)
{
    e->out_len = 0;
    if (e->out)
        e->out[0] = 0;
    e->pick_id = -1;
    while (*line == ' ' || *line == '\t')
        line++;
    if (*line != '/')
        return fail(e, "not a command: %s", line);
    line++;
    size_t nlen = strcspn(line, " \t");
    char name[64];
    if (nlen == 0 || nlen >= sizeof name) {
        return fail(e, "Unknown command '/%.*s'. Type /help.", (int)(nlen < 60 ? nlen : 60),
                    line);
    }
    memcpy(name, line, nlen);
    name[nlen] = 0;
    e->force = nlen > 1 && name[nlen - 1] == '!';   /* /save! FILE */
    if (e->force)
        name[nlen - 1] = 0;
    char msg[512];
    const cmd_entry *c = lookup_in(e, name, msg, sizeof msg);
    if (!c)
        return fail(e, "%s", msg);
    char **argv = NULL;
    int argc = cmd_split_args(line + nlen, &argv, msg, sizeof msg);
    if (argc < 0)
        return fail(e, "/%s: %s", c->name, msg);
    int r;
    const cmd_entry *near = NULL;
    if ((argc < c->min_args || argc > c->max_args) &&
        (near = closest_command(e, c->name, argc, c, 1)) != NULL)   /* /sample 3 meant /samples 3 */
        r = fail(e, "/%s: %s arguments (usage: /%s%s%s). Did you mean /%s%s%s?", c->name,
                 argc < c->min_args ? "missing" : "too many", c->name, *c->args ? " " : "",
                 c->args, near->name, *near->args ? " " : "", near->args);
    else if (argc < c->min_args || argc > c->max_args)
        r = fail(e, "/%s: %s arguments (usage: /%s%s%s)", c->name,
                 argc < c->min_args ? "missing" : "too many", c->name, *c->args ? " " : "",
                 c->args);
    else if (e->busy && !c->busy_ok)
        r = fail(e, "/%s: not while generating (Ctrl-C stops the generation)", c->name);
    else
        r = c->exec(e, c, argc, argv);
    cmd_free_args(argv, argc);
    return r;
}

static bool parse_int_arg(const char *s, long lo, long hi, long *out)
{
    return util_parse_long(s, lo, hi, out) == UTIL_PARSE_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Help */

static int exec_help(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (argc == 1) {
        const char *name = argv[0][0] == '/' ? argv[0] + 1 : argv[0];
        char msg[512];
        const cmd_entry *h = lookup_in(e, name, msg, sizeof msg);
        if (!h)
            return fail(e, "%s", msg);
        out_add(e, "/%s%s%s: %s", h->name, *h->args ? " " : "", h->args, h->usage);
        if (h->alias)
            out_add(e, " (also /%s)", h->alias);
        if (h->busy_ok)
            out_add(e, "; works while generating");
        return CMD_DONE;
    }
    out_add(e, "Commands by task (a unique prefix is enough, e.g. /te for /temp; without its value "
            "a command shows the current one; /help COMMAND for one):\n");
    const cmd_entry *rows[ROWS_MAX];
    int n = cmd_env_list(e, rows, ROWS_MAX);
    int group = -1;
    for (int i = 0; i < n && i < ROWS_MAX; i++) {
        const cmd_entry *h = rows[i];
        if (group_of(h) != group) {
            group = group_of(h);
            out_add(e, "%s:\n", *cmd_group_name(h->group) ? cmd_group_name(h->group) : "other");
        }
        char syn[48];
        snprintf(syn, sizeof syn, "/%s%s%s", h->name, *h->args ? " " : "", h->args);
        if (strlen(syn) > 20)   /* too long for its column: a line of its own */
            out_add(e, "  %s\n  %-20s", syn, "");
        else
            out_add(e, "  %-20s", syn);
        out_add(e, " %s%s%s%s\n", h->usage, h->alias ? " (/" : "", h->alias ? h->alias : "",
                h->alias ? ")" : "");
    }
    /* One line per paragraph: the transcript wraps them to its width. */
    out_add(e, "Text is sent to the model as the next part of the conversation: a prompt that "
            "starts with a letter begins on a new line, one that starts with a space continues "
            "the text, Enter on an empty line lets the model go on, \"\"\" starts and ends "
            "multi-line text, and //text sends text that starts with a slash.\n");
    out_add(e, "Keys: Enter send | Up/Down history | PgUp/PgDn scroll | Ctrl-C stops the "
            "generation, clears the line, or twice on an empty line quits | Ctrl-D on an empty "
            "line quits | Ctrl-A/E start/end | Ctrl-K/U kill to end/start | Ctrl-W kill a word | "
            "Ctrl-L redraw.\n");
    out_add(e, "Generated text is colored by the probability it was drawn with: plain >= 80%%, "
            "green 50-80%%, yellow 20-50%%, magenta 5-20%%, red < 5%%; your text is bold cyan; "
            "underlined tokens were chosen with /pick.\n");
    out_add(e, "/beam, /samples and /compare apply to the next line you send (Enter alone: the "
            "conversation as it is); /beam off etc. cancels. Each column shows: lp (mean "
            "logprob) = the mean of ln p of its tokens under the model's raw distribution "
            "(softmax of the logits, before penalties, temperature and truncation; for beams the "
            "beam's own token scores, the same unless a penalty is set), d2 (distinct-2) = "
            "distinct token bigrams / all bigrams, rep3 = token 3-grams that repeat an earlier "
            "one. /keep K "
            "makes column K the reply (the best beam is kept at once); /samples show K (or "
            "/beam show K) puts column K's latest step in the histogram pane beside them; Enter "
            "or Esc closes the columns.");
    return CMD_DONE;
}

/* ---------------------------------------------------------------------------------------------
 * Sampler settings (through sampler_params_set, so values and messages match the CLI flags) */

static void param_value(const sampler_params *p, const char *param, char *buf, size_t cap)
{
    if (!strcmp(param, "temp"))
        snprintf(buf, cap, "%g", (double)p->temperature);
    else if (!strcmp(param, "top_k"))
        snprintf(buf, cap, "%d", p->top_k);
    else if (!strcmp(param, "top_p"))
        snprintf(buf, cap, "%g", (double)p->top_p);
    else if (!strcmp(param, "min_p"))
        snprintf(buf, cap, "%g", (double)p->min_p);
    else if (!strcmp(param, "repeat"))
        snprintf(buf, cap, "%g", (double)p->repetition_penalty);
    else if (!strcmp(param, "presence"))
        snprintf(buf, cap, "%g", (double)p->presence_penalty);
    else if (!strcmp(param, "frequency"))
        snprintf(buf, cap, "%g", (double)p->frequency_penalty);
    else if (!strcmp(param, "window"))
        snprintf(buf, cap, "%d", p->penalty_window);
    else if (!strcmp(param, "order"))
        snprintf(buf, cap, "%s", p->order == SAMPLER_ORDER_LLAMA ? "llama" : "hf");
    else
        snprintf(buf, cap, "?");
}

static const char *param_note(const sampler_params *p, const char *param)
{
    if (!strcmp(param, "temp") && p->temperature == 0)
        return " (0: greedy, always the most likely token)";
    if (!strcmp(param, "temp") && p->greedy)
        return " (greedy is on: /sample to sample)";
    if (!strcmp(param, "top_k") && p->top_k <= 0)
        return " (off)";
    if (!strcmp(param, "top_p") && p->top_p >= 1)
        return " (off)";
    if (!strcmp(param, "min_p") && p->min_p <= 0)
        return " (off)";
    if (!strcmp(param, "repeat") && p->repetition_penalty == 1)
        return " (off)";
    if (!strcmp(param, "window") && p->penalty_window < 0)
        return " (the whole context)";
    if (!strcmp(param, "order"))
        return p->order == SAMPLER_ORDER_LLAMA
                   ? ": penalties, top-k, top-p, min-p, then temperature"
                   : ": penalties, temperature, top-k, top-p, min-p";
    return "";
}

static int exec_sampler(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    sampler_params *p = &e->s->set.sampler;
    char old[32];
    param_value(p, c->param, old, sizeof old);
    if (argc == 0) {
        out_add(e, "%s %s%s", c->name, old, param_note(p, c->param));
        return CMD_DONE;
    }
    tt_error err = {0};
    char def[32];
    const char *value = argv[0];
    if (strcmp(value, "default") == 0) {   /* the value the session started with */
        param_value(&e->defaults, c->param, def, sizeof def);
        value = def;
    }
    if (sampler_params_set(p, c->param, value, &err) != TT_OK) {
        /* err names the parameter already ("temp: 11 is outside [0, 10]"): not twice */
        size_t k = strlen(c->param);
        const char *why = strncmp(err.msg, c->param, k) == 0 && err.msg[k] == ':' &&
                          err.msg[k + 1] == ' ' ? err.msg + k + 2 : err.msg;
        return fail(e, "/%s: %s (kept %s)", c->name, why, old);
    }
    char now[32];
    param_value(p, c->param, now, sizeof now);
    out_add(e, "%s %s%s", c->name, now, param_note(p, c->param));
    if (strcmp(old, now) != 0)
        out_add(e, " (was %s)", old);
    return CMD_STATUS | CMD_PEEK;
}

static int exec_defaults(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    char was[200], now[200];
    sampler_params_format(&e->s->set.sampler, was, sizeof was);
    e->s->set.sampler = e->defaults;
    e->s->set.max_new_tokens = e->default_max_new;
    sampler_params_format(&e->s->set.sampler, now, sizeof now);
    out_add(e, "the settings tokentop started with: %s, max %d", now, e->default_max_new);
    if (strcmp(was, now) != 0)
        out_add(e, " (was %s)", was);
    return CMD_STATUS | CMD_PEEK;
}

static int exec_greedy(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    e->s->set.sampler.greedy = true;
    out_add(e, "greedy: always the most likely token (/sample to sample again)");
    return CMD_STATUS | CMD_PEEK;
}

static int exec_sample(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    e->s->set.sampler.greedy = false;
    if (e->s->set.sampler.temperature == 0)
        out_add(e, "sampling, but temp is 0, which is greedy: /temp X to sample");
    else
        out_add(e, "sampling at temp %g", (double)e->s->set.sampler.temperature);
    return CMD_STATUS | CMD_PEEK;
}

static int exec_seed(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (argc == 0) {
        out_add(e, "seed %llu", (unsigned long long)e->s->set.seed);
        return CMD_DONE;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(argv[0], &end, 10);
    if (errno || end == argv[0] || *end || argv[0][0] == '-' || argv[0][0] == '+')
        return fail(e, "/seed: \"%s\" is not an integer in [0, %llu] (kept %llu)", argv[0],
                    (unsigned long long)UINT64_MAX, (unsigned long long)e->s->set.seed);
    session_set_seed(e->s, v);
    out_add(e, "seed %llu (the random stream starts over)", v);
    return CMD_STATUS;
}

static int exec_max(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (argc == 0) {
        out_add(e, "max %d new tokens per turn", e->s->set.max_new_tokens);
        return CMD_DONE;
    }
    long v;
    if (!parse_int_arg(argv[0], 1, 1 << 24, &v))
        return fail(e, "/max: \"%s\" is not an integer in [1, %d] (kept %d)", argv[0], 1 << 24,
                    e->s->set.max_new_tokens);
    int old = e->s->set.max_new_tokens;
    e->s->set.max_new_tokens = (int)v;
    out_add(e, "max %ld new tokens per turn (was %d)", v, old);
    return CMD_STATUS;
}

static void list_stops(cmd_env *e)
{
    const session_settings *set = &e->s->set;
    if (set->n_stops == 0) {
        out_add(e, "no stop strings");
        return;
    }
    out_add(e, "stop strings:");
    for (int i = 0; i < set->n_stops; i++) {
        char buf[256];
        show_text(set->stops[i], buf, sizeof buf);
        out_add(e, " \"%s\"", buf);
    }
}

static int exec_stop(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (argc == 0) {
        list_stops(e);
        return CMD_DONE;
    }
    if (argc == 1 && strcmp(argv[0], "clear") == 0) {
        int n = e->s->set.n_stops;
        session_clear_stops(e->s);
        out_add(e, "stop strings cleared (%d removed)", n);
        return CMD_STATUS;
    }
    const char *text;
    if (strcmp(argv[0], "add") == 0) {
        if (argc != 2)
            return fail(e, "/stop add: give one string (quote it if it has spaces)");
        text = argv[1];
    } else {
        if (argc != 1)
            return fail(e, "/stop: give one string (quote it if it has spaces), or add S, clear");
        text = argv[0];
    }
    tt_error err = {0};
    if (session_add_stop(e->s, text, &err) != TT_OK)
        return fail(e, "/stop: %s", err.msg);
    char buf[256];
    show_text(text, buf, sizeof buf);
    out_add(e, "stop string added: \"%s\" (%d in all)", buf, e->s->set.n_stops);
    return CMD_STATUS;
}

/* ---------------------------------------------------------------------------------------------
 * /show */

/* /show's pace line. */
static void show_pace(cmd_env *e)
{
    if (e->pace.rate > 0)
        out_add(e, "pace        %g tokens/s shown (/pace 0: as fast as the engine goes; the "
                "status bar's tok/s is the engine's)\n", e->pace.rate);
    else
        out_add(e, "pace        off: tokens shown as fast as the engine goes (/pace N)\n");
}

/* /show's speculative line: on/off, gamma and how it is chosen, the draft. */
static void show_speculative(cmd_env *e)
{
    const session *s = e->s;
    const spec_tuner *t = &s->tuner;
    char how[160];
    if (!s->gamma_adaptive)
        snprintf(how, sizeof how, "fixed (/gamma auto: chosen from measured costs)");
    else if (t->a_ms > 0)
        snprintf(how, sizeof how, "auto: chose %d from acceptance %.2f and the measured cost of a "
                 "round (%.3f ms at gamma %d)", t->chosen, t->alpha, spec_tuner_cost(t, t->chosen),
                 t->chosen);
    else
        snprintf(how, sizeof how, "auto: from measured costs once a few rounds have run");
    out_add(e, "speculative %s, gamma %d %s, draft %s", s->spec_on ? "on" : "off", s->gamma,
            how, e->draft_dir ? e->draft_dir : "");
}

/* /show's "x plain" line: the figure, its spread and what it was measured from. */
static void show_plain_speedup(cmd_env *e)
{
    const session *s = e->s;
    const session_stats *st = &s->last;
    double lo, hi, x = session_plain_speedup(s, &lo, &hi);
    if (x > 0)
        out_add(e, "x plain     %.2f [%.2f-%.2f]: %d rounds, each after a plain step timed in "
                "the turn (medians %.3f ms a round, %.3f ms a step; %.2f tokens a round); the "
                "spread is the quartiles of blocks of %d rounds\n", x, lo, hi, st->plain_probes,
                st->round_ms, st->plain_step_ms,
                st->spec_rounds ? (double)st->spec_tokens / st->spec_rounds : 0.0,
                SESSION_PROBE_BLOCK);
    else
        out_add(e, "x plain     measuring: %d of %d rounds paired with a plain step\n",
                st->plain_probes, SESSION_PROBE_MIN);
}

static int exec_show(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    const session *s = e->s;
    const model_config *cfg = &s->model->config;
    char line[256];
    out_add(e, "model       %s (%s): %s, %.1fM parameters, V %d, %d positions, C %d, L %d, "
            "NH %d, NKV %d, HS %d%s%s\n", e->model_name, e->model_dir, cfg->arch->name,
            (double)s->model->n_params / 1e6, cfg->V, cfg->maxT, cfg->C, cfg->L, cfg->NH,
            cfg->NKV, cfg->HS, s->model->quantization[0] ? ", file " : "",
            s->model->quantization);
    if (s->model->gguf)
        out_add(e, "file        GGUF %s, %.2f bits a weight, %.1f MB\n",
                s->model->quantization, gguf_bits_per_weight(s->model->gguf),
                (double)gguf_file_size(s->model->gguf) / 1e6);
    out_add(e, "engine      %s\n", e->engine_desc);
    for (int i = 0; i < e->n_modules; i++)
        if (e->modules[i]->show)
            e->modules[i]->show(e);
    if (e->backend_note)
        out_add(e, "backend     auto: %s\n", e->backend_note);
    out_add(e, "threads     %s\n", cpu_engine_describe_threads(s->eng, line, sizeof line));
    sampler_params_format(&s->set.sampler, line, sizeof line);
    out_add(e, "sampler     %s\n", line);
    out_add(e, "mode        %s%s\n",
            (s->set.sampler.greedy || s->set.sampler.temperature == 0) ? "greedy" : "sample",
            e->step_mode ? ", step mode" : "");
    out_add(e, "generation  max %d new tokens, min %d, %s, seed %llu, ", s->set.max_new_tokens,
            s->set.min_tokens, s->set.stop_at_eos ? "stops at EOS" : "ignores EOS",
            (unsigned long long)s->set.seed);
    list_stops(e);
    out_add(e, "\n");
    size_t kv_pos = model_config_kv_bytes_per_token(cfg, sizeof(float));
    char whose[64];
    if (s->eng->n_ctx == cfg->maxT)
        snprintf(whose, sizeof whose, "the model's");
    else
        snprintf(whose, sizeof whose, "--ctx, or %d at most by default", ENGINE_DEFAULT_CTX_MAX);
    out_add(e, "context     KV cache %d/%d positions (%s; %.1f KiB a position, %.1f MiB in "
            "all); conversation %d tokens in %d %s; window from token %d; %d cached; a full "
            "context keeps %.0f%%%s\n",
            s->eng->n_past, s->eng->n_ctx,
            whose,
            (double)kv_pos / 1024.0, (double)kv_pos * s->eng->n_ctx / 1048576.0,
            s->n_tokens, s->n_turns, s->n_turns == 1 ? "turn" : "turns", s->window_start,
            session_cached_prefix(s), (double)s->set.context_keep * 100,
            s->set.context_shift ? "" : " (shifting off)");
    const session_stats *st = &s->last;
    if (st->prompt_tokens > 0 || st->generated_tokens > 0)
        out_add(e, "last turn   prompt %d tokens (reused %d, prefilled %d), generated %d, ttft "
                "%.1f ms, prefill %.1f tok/s, decode %.1f tok/s, stop: %s\n",
                st->prompt_tokens, st->reused_tokens, st->prefilled_tokens,
                st->generated_tokens, st->ttft_ms, st->prefill_tok_s, st->decode_tok_s,
                session_stop_name(st->stop));
    else
        out_add(e, "last turn   none yet\n");
    if (st->speculative)
        show_plain_speedup(e);
    out_add(e, "view        %d bars%s\n", e->bars, e->line_mode ? ", line mode" : "");
    show_pace(e);
    if (s->draft)
        show_speculative(e);
    else
        out_add(e, "speculative off: no draft model (--draft DIR or /draft DIR)");
    return CMD_DONE;
}

/* ---------------------------------------------------------------------------------------------
 * Editing the conversation */

static int exec_reset(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    end_open_generation(e);
    int n = e->s->n_tokens;
    session_reset(e->s);
    e->hist.kind = UI_HIST_NONE;
    out_add(e, "conversation and KV cache cleared (%d tokens)", n);
    return CMD_CONV | CMD_CLEAR | CMD_STATUS;
}

static int exec_undo(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    session *s = e->s;
    long n = 0;
    if (argc == 1 && !parse_int_arg(argv[0], 1, 1L << 30, &n))
        return fail(e, "/undo: \"%s\" is not a positive integer", argv[0]);
    if (s->n_tokens == 0)
        return fail(e, "/undo: the conversation is empty");
    if (n > s->n_tokens)
        return fail(e, "/undo: %ld is more than the %d tokens in the conversation", n,
                    s->n_tokens);
    end_open_generation(e);
    int dropped = argc == 1 ? session_undo_tokens(s, (int)n) : session_undo_turn(s);
    /* Drop the cache entries past the conversation now, so the status bar shows it; the prefix
     * stays for the next turn. */
    engine_truncate(s->eng, session_cached_prefix(s));
    e->hist.kind = UI_HIST_NONE;
    out_add(e, "dropped %d token%s (%s); %d remain, %d of them in the KV cache", dropped,
            dropped == 1 ? "" : "s", argc == 1 ? "as asked" : "the last turn", s->n_tokens,
            session_cached_prefix(s));
    return CMD_CONV | CMD_STATUS;
}

static int exec_regen(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    session *s = e->s;
    end_open_generation(e);
    if (s->n_turns == 0)
        return fail(e, "/regen: nothing to regenerate yet");
    int dropped = session_drop_reply(s);
    if (dropped == 0)
        return fail(e, "/regen: the last turn has no reply yet (press Enter to generate one)");
    engine_truncate(s->eng, session_cached_prefix(s));
    e->hist.kind = UI_HIST_NONE;
    out_add(e, "regenerating the last reply (%d tokens dropped; %d tokens stay cached)", dropped,
            session_cached_prefix(s));
    return CMD_CONV | CMD_STATUS | CMD_GENERATE;
}

static int exec_ids(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    const session *s = e->s;
    long n = 16;
    if (argc == 1 && !parse_int_arg(argv[0], 1, 1000, &n))
        return fail(e, "/ids: \"%s\" is not an integer in [1, 1000]", argv[0]);
    if (s->n_tokens == 0) {
        out_add(e, "the conversation is empty");
        return CMD_DONE;
    }
    int from = s->n_tokens - (int)n < 0 ? 0 : s->n_tokens - (int)n;
    out_add(e, "%6s %6s  %-16s %-15s %s", "pos", "id", "token", "origin", "p");
    for (int i = from; i < s->n_tokens; i++) {
        char label[128];
        token_label(s, s->tokens[i], label, sizeof label);
        int pad = 16 - ui_text_width(label, strlen(label));   /* columns, not bytes (␣ is 3) */
        out_add(e, "\n%6d %6d  %s%*s %-15s %.4f", i, (int)s->tokens[i], label, pad > 0 ? pad : 0,
                "", token_origin_name((token_origin)s->info[i].origin), (double)s->info[i].p);
    }
    return CMD_DONE;
}

/* ---------------------------------------------------------------------------------------------
 * Step mode */

static int exec_step(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (e->line_mode)
        return fail(e, "/step: step mode needs the terminal UI");
    if (argc == 0) {   /* as every command: no value shows the current one */
        out_add(e, "step mode %s (/step %s)", e->step_mode ? "on" : "off",
                e->step_mode ? "off leaves it" : "on turns it on");
        return CMD_DONE;
    }
    bool on;
    if (!strcmp(argv[0], "on"))
        on = true;
    else if (!strcmp(argv[0], "off"))
        on = false;
    else
        return fail(e, "/step: \"%s\" is not on or off", argv[0]);
    if (!on)
        end_open_generation(e);
    e->step_mode = on;
    if (on)
        out_add(e, "step mode on: Enter generates one token; /pick N puts the N-th token of the "
                "histogram there instead; /step off returns");
    else
        out_add(e, "step mode off");
    return CMD_STATUS | CMD_PEEK;
}

static int exec_pick(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    session *s = e->s;
    if (e->line_mode)
        return fail(e, "/pick: step mode needs the terminal UI");
    if (!e->step_mode)
        return fail(e, "/pick works in step mode: /step on first");
    int cap = (int)(sizeof e->hist.snap.top / sizeof e->hist.snap.top[0]);
    int rows = e->hist.snap.n_top < cap ? e->hist.snap.n_top : cap;
    if (e->hist.kind == UI_HIST_NONE || rows <= 0)
        return fail(e, "/pick: no histogram to pick from yet (type a prompt or press Enter)");
    long n;
    if (!parse_int_arg(argv[0], 1, rows, &n))
        return fail(e, "/pick: \"%s\" is not a row of the histogram (1 to %d)", argv[0], rows);
    const sampler_entry *ent = &e->hist.snap.top[n - 1];
    char label[128], was[128];
    token_label(s, ent->id, label, sizeof label);
    int flags = CMD_STEP | CMD_STATUS;
    if (e->hist.kind == UI_HIST_STEP) {
        if (e->hist.pos != s->n_tokens - 1 || s->tokens[e->hist.pos] != e->hist.snap.token)
            return fail(e, "/pick: the histogram no longer matches the conversation (press Enter "
                        "to step)");
        token_label(s, e->hist.snap.token, was, sizeof was);
        end_open_generation(e);
        session_undo_tokens(s, 1);
        flags |= CMD_CONV;
        out_add(e, "picked #%ld %s instead of %s", n, label, was);
    } else {
        if (e->hist.pos != s->n_tokens)
            return fail(e, "/pick: the histogram no longer matches the conversation (press Enter "
                        "to step)");
        out_add(e, "picked #%ld %s", n, label);
    }
    const char *cut = sampler_cut_name((sampler_cut)ent->cut);
    if (cut)
        out_add(e, " (the chain had removed it: %s)", cut);
    e->pick_id = ent->id;
    return flags;
}

static int exec_bars(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (argc == 0) {
        out_add(e, "the histogram shows %d tokens", e->bars);
        return CMD_DONE;
    }
    long v;
    if (!parse_int_arg(argv[0], 1, SAMPLER_TOP_MAX, &v))
        return fail(e, "/bars: \"%s\" is not an integer in [1, %d] (kept %d)", argv[0],
                    SAMPLER_TOP_MAX, e->bars);
    int old = e->bars;
    e->bars = (int)v;
    out_add(e, "the histogram shows %ld tokens (was %d)", v, old);
    return CMD_LAYOUT;
}

static int exec_column(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (argc == 1 && strcmp(argv[0], "temp") && strcmp(argv[0], "off"))
        return fail(e, "/column: \"%s\" is not temp or off", argv[0]);
    if (argc == 1)
        e->temp_column = strcmp(argv[0], "temp") == 0;
    out_add(e, "%s", e->temp_column
                         ? "the histogram shows raw, temp (temperature alone, before top-k, top-p "
                           "and min-p cut) and final: what temperature reshaped, then what the "
                           "cuts removed"
                         : "the histogram shows raw and final (/column temp adds temperature "
                           "alone)");
    return argc ? CMD_LAYOUT : CMD_DONE;
}

/* ---------------------------------------------------------------------------------------------
 * Speculative decoding (the session runs it; see core/decode/speculative.h) */

#define NO_DRAFT "speculative decoding needs a draft model: start with --draft DIR or load one " \
                 "with /draft DIR (the embedded target's draft is models/kjv-draft)"

static int exec_spec(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    session *s = e->s;
    if (argc == 0) {
        if (!s->draft)
            return fail(e, NO_DRAFT);
        out_add(e, "speculative decoding %s (gamma %d%s)", s->spec_on ? "on" : "off", s->gamma,
                s->gamma_adaptive ? ", adaptive" : "");
        return CMD_DONE;
    }
    if (strcmp(argv[0], "on") && strcmp(argv[0], "off"))
        return fail(e, "/spec: \"%s\" is not on or off", argv[0]);
    bool on = strcmp(argv[0], "on") == 0;
    if (on && !s->draft)
        return fail(e, NO_DRAFT);
    session_set_speculative(s, on, NULL);
    out_add(e, "speculative decoding %s", on ? "on" : "off");
    return CMD_STATUS;
}

static int exec_gamma(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    session *s = e->s;
    if (argc == 0) {
        out_add(e, "gamma %d%s", s->gamma, s->gamma_adaptive ? " (adaptive)" : "");
        return CMD_DONE;
    }
    if (strcmp(argv[0], "auto") == 0) {
        session_set_gamma(s, s->gamma, true, NULL);
        out_add(e, "gamma auto from %d: chosen after every round to maximise expected tokens per "
                "ms from the running acceptance and the measured cost of a round", s->gamma);
        return CMD_STATUS;
    }
    long v;
    if (!parse_int_arg(argv[0], 1, SPEC_GAMMA_MAX, &v))
        return fail(e, "/gamma: \"%s\" is not an integer in [1, %d] or auto (kept %d)", argv[0],
                    SPEC_GAMMA_MAX, s->gamma);
    session_set_gamma(s, (int)v, false, NULL);
    out_add(e, "gamma %ld draft tokens per round", v);
    return CMD_STATUS;
}

static int exec_pace(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (argc == 0) {
        show_pace(e);
        return CMD_DONE;
    }
    double v;
    tt_error err;
    if (pace_parse(argv[0], &v, &err) != TT_OK)
        return fail(e, "/%s (kept %g)", err.msg, e->pace.rate);
    pace_set_rate(&e->pace, v);
    if (v > 0)
        out_add(e, "pace %g tokens/s: each token (and each rejected draft) is held on screen "
                "%.0f ms", v, 1e3 / v);
    else
        out_add(e, "pace off: tokens shown as fast as the engine goes");
    return CMD_STATUS;
}

static int exec_draft(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (argc == 0) {
        out_add(e, "draft model: %s", e->s->draft && e->draft_dir ? e->draft_dir : "(none)");
        return CMD_DONE;
    }
    if (!e->host || !e->host->load_draft)
        return fail(e, "/draft: loading a draft model is not available here (start with --draft "
                    "DIR)");
    tt_error err = {0};
    if (e->host->load_draft(e->host->user, argv[0], &err) != TT_OK)
        return fail(e, "/draft: %s", err.msg);
    out_add(e, "draft model %s loaded; speculative decoding on (gamma %d)", argv[0],
            e->s->gamma);
    return CMD_STATUS;
}

/* ---------------------------------------------------------------------------------------------
 * /save and /load */

char *cmd_expand_home(const char *path)
{
    const char *home = getenv("HOME");
    if (path[0] == '~' && (path[1] == '/' || path[1] == 0) && home && *home)
        return util_path_join(home, path[1] ? path + 2 : "");
    return strdup(path);
}

static uint64_t tokens_hash(const session *s)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (int i = 0; i < s->n_tokens; i++) {
        h ^= (uint64_t)(uint32_t)s->tokens[i];
        h *= 1099511628211ull;
    }
    return h;
}

static void mark_saved(cmd_env *e)
{
    e->saved_n = e->s->n_tokens;
    e->saved_hash = tokens_hash(e->s);
}

static int exec_save(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    tt_error err = {0};
    char *path = cmd_expand_home(argv[0]);
    if (!path)
        return fail(e, "/save: out of memory");
    if (!e->force && access(path, F_OK) == 0) {
        fail(e, "/save: %s exists: /save! %s replaces it", path, argv[0]);
        free(path);
        return CMD_ERROR;
    }
    if (session_file_save(e->s, path, e->model_name, &err) != TT_OK) {
        free(path);
        return fail(e, "/save: %s", err.msg);
    }
    mark_saved(e);
    out_add(e, "saved %d tokens in %d %s and the settings to %s", e->s->n_tokens,
            e->s->n_turns, e->s->n_turns == 1 ? "turn" : "turns", path);
    free(path);
    return CMD_DONE;
}

static int exec_load(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    tt_error err = {0};
    int n = 0;
    char *path = cmd_expand_home(argv[0]);
    if (!path)
        return fail(e, "/load: out of memory");
    /* the file first (a file that cannot load needs no question), then the unsaved work */
    size_t len = 0;
    char *text = NULL;
    session_file f;
    memset(&f, 0, sizeof f);
    tt_status lst = util_read_file(path, 0, &text, &len, NULL, &err);
    if (lst == TT_OK)
        lst = session_file_parse(text, len, path, e->s->model->config.V, &e->s->set, &f, &err);
    free(text);
    free(path);
    if (lst != TT_OK)
        return fail(e, "/load: %s", err.msg);
    if (!e->force && e->s->n_tokens > 0 &&
        (e->s->n_tokens != e->saved_n || tokens_hash(e->s) != e->saved_hash)) {
        session_file_free(&f);
        return fail(e, "/load: the conversation (%d tokens) is not saved: /save FILE first, or "
                    "/load! %s to replace it", e->s->n_tokens, argv[0]);
    }
    end_open_generation(e);
    lst = session_file_apply(e->s, &f, &n, &err);
    session_file_free(&f);
    if (lst != TT_OK)
        return fail(e, "/load: %s", err.msg);
    mark_saved(e);
    e->hist.kind = UI_HIST_NONE;
    int cached = session_cached_prefix(e->s);
    out_add(e, "loaded %s: %d tokens in %d %s; %d of them are still in the KV cache", argv[0],
            n, e->s->n_turns, e->s->n_turns == 1 ? "turn" : "turns", cached);
    int n_ctx = e->s->eng->n_ctx;
    if (n > n_ctx)
        out_add(e, "\n%s: %d tokens are more than the context holds (%d): %s", argv[0], n, n_ctx,
                e->s->set.context_shift ? "the next turn keeps the last part of the conversation "
                "and drops the oldest tokens"
                                        : "context shifting is off, so the next turn will stop at "
                "once (/undo or /reset make room)");
    return CMD_CONV | CMD_STATUS | CMD_CLEAR;
}

static int exec_quit(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    return CMD_QUIT;
}

/* ---------------------------------------------------------------------------------------------
 * The table (the order is the order of /help) */

const cmd_entry cmd_table[] = {
    {.name = "help", .alias = "?", .args = "[COMMAND]",
     .usage = "this list, or one command's usage",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_help, .group = CMD_GROUP_SESSION},
    {.name = "temp", .alias = NULL, .args = "[X]",
     .usage = "temperature >= 0 (0 = greedy)",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = "temp",
     .exec = exec_sampler, .group = CMD_GROUP_SAMPLER},
    {.name = "topk", .alias = NULL, .args = "[N]",
     .usage = "keep the N most likely tokens (0 = off)",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = "top_k",
     .exec = exec_sampler, .group = CMD_GROUP_SAMPLER},
    {.name = "topp", .alias = NULL, .args = "[X]",
     .usage = "keep the smallest set with mass >= X, X in [0, 1] (1 = off)",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = "top_p",
     .exec = exec_sampler, .group = CMD_GROUP_SAMPLER},
    {.name = "minp", .alias = NULL, .args = "[X]",
     .usage = "keep tokens with p >= X * p_max, X in [0, 1] (0 = off)",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = "min_p",
     .exec = exec_sampler, .group = CMD_GROUP_SAMPLER},
    {.name = "presence", .alias = NULL, .args = "[X]",
     .usage = "presence penalty: logit -= X if the token occurred",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = "presence",
     .exec = exec_sampler, .group = CMD_GROUP_SAMPLER},
    {.name = "frequency", .alias = NULL, .args = "[X]",
     .usage = "frequency penalty: logit -= X * count",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = "frequency",
     .exec = exec_sampler, .group = CMD_GROUP_SAMPLER},
    {.name = "repeat", .alias = NULL, .args = "[X]",
     .usage = "repetition penalty > 0 (1 = off)",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = "repeat",
     .exec = exec_sampler, .group = CMD_GROUP_SAMPLER},
    {.name = "window", .alias = NULL, .args = "[N]",
     .usage = "tokens the penalties look back (-1 = all)",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = "window",
     .exec = exec_sampler, .group = CMD_GROUP_SAMPLER},
    {.name = "order", .alias = NULL, .args = "[hf|llama]",
     .usage = "chain order: temperature first (hf) or last (llama)",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = "order",
     .exec = exec_sampler, .group = CMD_GROUP_SAMPLER},
    {.name = "greedy", .alias = NULL, .args = "",
     .usage = "always take the most likely token",
     .min_args = 0, .max_args = 0, .busy_ok = true, .param = NULL,
     .exec = exec_greedy, .group = CMD_GROUP_SAMPLER},
    {.name = "sample", .alias = NULL, .args = "",
     .usage = "draw from the distribution again",
     .min_args = 0, .max_args = 0, .busy_ok = true, .param = NULL,
     .exec = exec_sample, .group = CMD_GROUP_SAMPLER},
    {.name = "defaults", .alias = NULL, .args = "",
     .usage = "the sampler settings and max tokens tokentop started with (the model's "
              "generation_config.json and the command line); /temp default etc. for one",
     .min_args = 0, .max_args = 0, .busy_ok = true, .param = NULL,
     .exec = exec_defaults, .group = CMD_GROUP_SAMPLER},
    {.name = "seed", .alias = NULL, .args = "[N]",
     .usage = "restart the random stream from seed N",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_seed, .group = CMD_GROUP_SAMPLER},
    {.name = "max", .alias = NULL, .args = "[N]",
     .usage = "new tokens per turn at most",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_max, .group = CMD_GROUP_GENERATION},
    {.name = "stop", .alias = NULL, .args = "[S|add S|clear]",
     .usage = "list, add or clear stop strings",
     .min_args = 0, .max_args = 2, .busy_ok = true, .param = NULL,
     .exec = exec_stop, .group = CMD_GROUP_GENERATION},
    {.name = "show", .alias = NULL, .args = "",
     .usage = "all settings, model info, cache state",
     .min_args = 0, .max_args = 0, .busy_ok = true, .param = NULL,
     .exec = exec_show, .group = CMD_GROUP_SESSION},
    {.name = "ids", .alias = NULL, .args = "[N]",
     .usage = "the last N tokens with ids, origins and probabilities",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_ids, .group = CMD_GROUP_DISPLAY},
    {.name = "reset", .alias = "clear", .args = "",
     .usage = "clear the conversation and the KV cache",
     .min_args = 0, .max_args = 0, .busy_ok = false, .param = NULL,
     .exec = exec_reset, .group = CMD_GROUP_SESSION},
    {.name = "undo", .alias = NULL, .args = "[N]",
     .usage = "drop the last turn, or the last N tokens",
     .min_args = 0, .max_args = 1, .busy_ok = false, .param = NULL,
     .exec = exec_undo, .group = CMD_GROUP_SESSION},
    {.name = "regen", .alias = NULL, .args = "",
     .usage = "generate the last reply again (the prompt stays cached)",
     .min_args = 0, .max_args = 0, .busy_ok = false, .param = NULL,
     .exec = exec_regen, .group = CMD_GROUP_GENERATION},
    {.name = "step", .alias = NULL, .args = "[on|off]",
     .usage = "step mode: Enter generates one token",
     .min_args = 0, .max_args = 1, .busy_ok = false, .param = NULL,
     .exec = exec_step, .group = CMD_GROUP_GENERATION},
    {.name = "pick", .alias = NULL, .args = "N",
     .usage = "in step mode, take the N-th token of the histogram",
     .min_args = 1, .max_args = 1, .busy_ok = false, .param = NULL,
     .exec = exec_pick, .group = CMD_GROUP_GENERATION},
    {.name = "bars", .alias = NULL, .args = "[N]",
     .usage = "tokens the histogram shows (1 to 32)",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_bars, .group = CMD_GROUP_DISPLAY},
    {.name = "column", .alias = NULL, .args = "[temp|off]",
     .usage = "a histogram column for temperature alone, before the cuts",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_column, .group = CMD_GROUP_DISPLAY},
    {.name = "save", .alias = NULL, .args = "FILE",
     .usage = "save the conversation and settings (JSON)",
     .min_args = 1, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_save, .group = CMD_GROUP_SESSION},
    {.name = "load", .alias = NULL, .args = "FILE",
     .usage = "load a saved conversation (or a text file as the prompt)",
     .min_args = 1, .max_args = 1, .busy_ok = false, .param = NULL,
     .exec = exec_load, .group = CMD_GROUP_SESSION},
    {.name = "spec", .alias = NULL, .args = "[on|off]",
     .usage = "speculative decoding with the draft model",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_spec, .group = CMD_GROUP_SPECULATIVE},
    {.name = "gamma", .alias = NULL, .args = "[N|auto]",
     .usage = "draft tokens per speculative round (auto: adaptive)",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_gamma, .group = CMD_GROUP_SPECULATIVE},
    {.name = "pace", .alias = NULL, .args = "[N]",
     .usage = "show at most N tokens per second (0: engine speed), to follow the histogram",
     .min_args = 0, .max_args = 1, .busy_ok = true, .param = NULL,
     .exec = exec_pace, .group = CMD_GROUP_DISPLAY},
    {.name = "draft", .alias = NULL, .args = "[DIR]",
     .usage = "the draft model for speculative decoding",
     .min_args = 0, .max_args = 1, .busy_ok = false, .param = NULL,
     .exec = exec_draft, .group = CMD_GROUP_SPECULATIVE},
    {.name = "quit", .alias = "exit", .args = "",
     .usage = "leave tokentop (also Ctrl-D on an empty line)",
     .min_args = 0, .max_args = 0, .busy_ok = true, .param = NULL,
     .exec = exec_quit, .group = CMD_GROUP_SESSION},
};

const int cmd_count = (int)(sizeof cmd_table / sizeof cmd_table[0]);
