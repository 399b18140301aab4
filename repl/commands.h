/* commands.h: the slash-commands as data: one table row per command {name, alias, args, usage,
 * group, exec}, lookup by unique prefix, generated help, uniform argument checks and messages.
 * Handlers change the session and the REPL's settings and say what changed (CMD_* flags); they never
 * draw and never run a generation themselves: the main loop (repl.c, linemode.c) acts on the flags.
 * Command modules outside commands.c (repl/compare.c, repl/dtype_cmd.c) keep their own rows and
 * register them into an environment (cmd_env_add_module): the table never reaches into them. */
#ifndef TOKENTOP_COMMANDS_H
#define TOKENTOP_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/decode/dtype_compare.h"
#include "core/decode/pace.h"
#include "core/decode/sampler.h"
#include "core/session/session.h"
#include "ui/histogram.h"

/* What a command changed; the main loop redraws and acts accordingly. */
enum {
    CMD_DONE = 0,
    CMD_ERROR = 1 << 0,     /* the command failed; nothing changed (the message says why) */
    CMD_STATUS = 1 << 1,    /* something the status bar shows changed */
    CMD_CONV = 1 << 2,      /* the conversation changed: rebuild the transcript */
    CMD_PEEK = 1 << 3,      /* sampler settings changed: the next-token view may differ */
    CMD_GENERATE = 1 << 4,  /* start a generation now (/regen) */
    CMD_STEP = 1 << 5,      /* take one step choosing env->pick_id (/pick) */
    CMD_QUIT = 1 << 6,
    CMD_CLEAR = 1 << 7,     /* forget the transcript's notices (/reset) */
    CMD_LAYOUT = 1 << 8,    /* pane sizes changed (/bars) */
};

/* The tasks /help and the command reference group commands by, in their order. CMD_GROUP_NONE is
 * no group: a row without one is a row without docs (check_commands refuses it). */
typedef enum {
    CMD_GROUP_NONE = 0,
    CMD_GROUP_SAMPLER,
    CMD_GROUP_GENERATION,
    CMD_GROUP_SPECULATIVE,
    CMD_GROUP_COMPARE,
    CMD_GROUP_SESSION,
    CMD_GROUP_DISPLAY,
    CMD_GROUP_COUNT
} cmd_group;

/* The heading of a group ("sampler", ...); "" for CMD_GROUP_NONE or a value out of range. */
const char *cmd_group_name(cmd_group g);

typedef struct cmd_module cmd_module;
#define CMD_MODULES_MAX 8

/* The state commands read and change. The REPL owns it; session and names are not owned. */
typedef struct cmd_env {
    session *s;
    const char *model_name;        /* display name */
    const char *model_dir;
    const char *engine_desc;       /* engine->description */
    const char *backend;           /* engine->ops->name */
    const char *backend_note;      /* why --backend auto runs on the CPU (cli_app), or NULL */
    bool line_mode;                /* no terminal UI: /step and /pick are refused */
    bool busy;                     /* a generation is running (not step mode): commands that
                                      edit the conversation are refused */
    int bars;                      /* tokens the histogram shows (1 .. SAMPLER_TOP_MAX) */
    bool temp_column;              /* /column temp: the histogram adds temperature alone */
    bool step_mode;
    /* The histogram on screen, which /pick chooses from. */
    ui_hist_kind hist_kind;
    sampler_snapshot hist;
    int hist_pos;                  /* conversation index the histogram describes */
    int hist_step;
    /* Speculative decoding: the session holds the draft, gamma and on/off (s->draft, s->gamma,
     * s->gamma_adaptive, s->spec_on). /draft DIR loads through load_draft (set by the front end;
     * NULL: loading is not available), which attaches the draft and sets draft_dir. */
    tt_status (*load_draft)(void *user, const char *dir, tt_error *err);
    void *load_draft_user;
    const char *draft_dir;         /* the attached draft's directory, not owned */
    /* The draft's side of the position the histogram shows (speculative steps): */
    bool hist_has_draft;
    sampler_snapshot hist_draft;   /* the draft's chain there (q) */
    spec_draft hist_spec;          /* q(x), p(x), the acceptance uniform, the verdict */
    bool hist_bonus;               /* the token was a bonus (no draft at that position) */
    /* Precision (/dtype, repl/dtype_cmd.c). make_engine (set by the front end; NULL: /dtype is
     * not available) creates an engine over the session's model on the session engine's backend
     * and n_ctx, holding weights in d. adopt_engine is called once the session runs on a new
     * engine (session_set_engine): the front end owns the engines and frees old. */
    tt_status (*make_engine)(void *user, tt_dtype d, engine **out, tt_error *err);
    void (*adopt_engine)(void *user, engine *old, engine *now);
    void *engine_user;
    engine *cmp;                   /* /dtype compare: the second engine, owned (freed by
                                      /dtype compare off and cmd_env_free); NULL when off */
    bool hist_has_cmp;             /* hist_cmp describes the histogram's position */
    dtype_compare hist_cmp;
    /* /beam, /samples, /compare and /keep (repl/compare.h); NULL: not available */
    struct compare_state *compare;
    /* /attn, the attention view (repl/attn_cmd.h); NULL: not available */
    struct attn_state *attn;
    /* Pacing (/pace): the front end holds each shown token back to pace.rate tokens per second
     * (0: none); the status bar keeps the engine's own speed. */
    pace_clock pace;
    /* The command modules registered beside the table (cmd_env_add_module), not owned. */
    const cmd_module *modules[CMD_MODULES_MAX];
    int n_modules;
    /* The settings the session started with (the model's generation defaults and the command
     * line): /defaults and /temp default (etc.) restore them. cmd_env_init copies them. */
    sampler_params defaults;
    int default_max_new;
    /* /save and /load: the conversation as last saved or loaded (its length and a hash of its
     * tokens), so /load can refuse to drop unsaved work; force is set for one command by a
     * trailing ! (/save! FILE replaces a file, /load! FILE drops the conversation). */
    int saved_n;
    uint64_t saved_hash;
    bool force;
    /* Outputs of the last command: */
    int32_t pick_id;               /* CMD_STEP: the token to force */
    char *out;                     /* (out_len) message lines, NUL-terminated */
    size_t out_len, out_cap;
} cmd_env;

typedef struct cmd_entry cmd_entry;
typedef int (*cmd_exec_fn)(cmd_env *e, const cmd_entry *c, int argc, char **argv);

struct cmd_entry {
    const char *name;       /* without the slash */
    const char *alias;      /* an exact-match alternative, or NULL */
    const char *args;       /* argument synopsis for usage lines, "" when none */
    const char *usage;      /* one line for /help */
    int min_args, max_args;
    bool busy_ok;           /* allowed while a generation runs */
    const char *param;      /* sampler_params_set name for the sampler rows, else NULL */
    cmd_exec_fn exec;
    cmd_group group;        /* the task /help lists it under */
};

/* The commands of commands.c itself (the order within a group is the order of /help). */
extern const cmd_entry cmd_table[];
extern const int cmd_count;

/* A module's commands and its hooks into the environment's lifetime. */
struct cmd_module {
    const char *name;                 /* for messages: "compare", "dtype" */
    const cmd_entry *rows;
    int n_rows;
    void (*show)(cmd_env *e);         /* adds its lines to /show (after the engine line), or NULL */
    void (*env_free)(cmd_env *e);     /* frees what it keeps in e (cmd_env_free calls it), or NULL */
};

/* Adds module m's commands to e (the front end calls it for each module it offers). Adding a module
 * twice is a no-op. Returns false (nothing added) when CMD_MODULES_MAX modules are registered. */
bool cmd_env_add_module(cmd_env *e, const cmd_module *m);

/* Every command e knows (the table, then each module's rows) in /help's order: by group, and in
 * table order within a group. Writes at most cap pointers to rows and returns how many there are. */
int cmd_env_list(const cmd_env *e, const cmd_entry **rows, int cap);

/* Prepares env for session s (not owned) with the defaults (10 bars, sampling, no step mode). */
void cmd_env_init(cmd_env *e, session *s);
void cmd_env_free(cmd_env *e);   /* NULL is safe */

/* Finds a command by exact name, alias, or unique name prefix. On failure returns NULL and puts
 * the message in msg: "Unknown command '/x'. Type /help." or
 * "ambiguous command: /t, could be: /temp, /topk, /topp". */
const cmd_entry *cmd_lookup(const char *name, char *msg, size_t cap);
/* The same over e's table and modules (cmd_lookup sees commands.c's table only). */
const cmd_entry *cmd_env_lookup(const cmd_env *e, const char *name, char *msg, size_t cap);

/* Runs one command line ("/name args..."). The message (confirmation, output or error) is in
 * e->out afterwards; the return value is a set of CMD_* flags (CMD_ERROR on any failure, with
 * every setting kept as it was). */
int cmd_execute(cmd_env *e, const char *line);

/* For handlers outside commands.c (repl/compare.c, repl/dtype_cmd.c): cmd_out appends
 * printf-style text to e->out. */
void cmd_out(cmd_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Replaces e->out with the message and returns CMD_ERROR. */
int cmd_fail(cmd_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True when line is a command ("/x" at the very start), false for text (including "//text",
 * which sends "/text", and " /x"). */
bool cmd_is_command(const char *line);

/* Splits an argument string into words: blanks separate, "double quotes" group, and backslash
 * escapes (\n \t \r \\ \" \xHH) work inside and outside quotes. Returns the count (or -1 with a
 * message in msg for an unterminated quote or a bad escape); *argv is malloc'd with the strings
 * (free with cmd_free_args). */
int cmd_split_args(const char *s, char ***argv, char *msg, size_t cap);
void cmd_free_args(char **argv, int argc);

/* The text a typed prompt adds to the conversation (malloc'd, *len bytes): the prompt itself,
 * with a newline in front when the conversation so far ends in something other than whitespace
 * (or the end-of-text token) and the prompt does not start with whitespace, so a new prompt
 * starts a new line unless it asks to continue the text (not in chat mode, where the format
 * separates the turns). "//x" sends "/x". */
char *cmd_prompt_text(const session *s, const char *input, size_t *len);

#endif
