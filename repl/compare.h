/* compare.h: several continuations of one prompt in the REPL: /beam N (beam search, the beams
 * shown growing, the best kept), /samples N (N seeds) and /compare SETTING V1 V2 ... (one column
 * per value, one seed), /keep K (column or beam K becomes the reply).
 *
 * How the prompt is taken: /beam, /samples and /compare arm a request; the next text line sent
 * (Enter alone: continue the conversation as it is) is added as a turn, as any prompt is, and
 * the request runs on it instead of a plain generation. "/beam off" (or /samples off, /compare
 * off) cancels. Beams and samples run on the engine's sequences (core/decode/beam.h, core/session/samples.h);
 * sequence 0, the conversation's cache, ends up holding the conversation with what was kept.
 *
 * The columns carry figures (core/decode/diversity.h): mean log-probability of the tokens under the
 * model's raw distribution (for beams: the beam's own token scores, the same unless a penalty is
 * set), distinct-2 and repeated 3-grams over token ids. */
#ifndef TOKENTOP_REPL_COMPARE_H
#define TOKENTOP_REPL_COMPARE_H

#include <stdbool.h>
#include <stdio.h>

#include "core/decode/diversity.h"
#include "core/session/session.h"
#include "repl/commands.h"
#include "ui/columns.h"

#define COMPARE_MAX_COLUMNS 8      /* /samples N and /compare values: what a screen can hold */
#define COMPARE_MAX_BEAMS 16       /* /beam N: rows of the live view */

typedef enum {
    COMPARE_NONE = 0,
    COMPARE_BEAM,
    COMPARE_SAMPLES,
    COMPARE_SETTING,
} compare_kind;

typedef struct {
    char label[64];                /* "seed 7", "temp 0.3", "beam 2" */
    int32_t *ids;                  /* (n) the continuation */
    token_info *info;              /* (n) origin and probability, for the conversation */
    double *raw_logprob;           /* (n) ln p_raw of each token (beams: the token's score) */
    int n, cap;
    char *text;                    /* what it reads as (escaped for the screen) */
    size_t len, text_cap;
    diversity_figures fig;
    char figures[96];              /* the figures as the board shows them */
    double logprob, score;         /* beams: summed log-probability and length-penalised score */
    const char *end;               /* why it ended: "eos", "max_tokens", "stop_string", ... */
    bool dim;                      /* the live beam view: pruned at the last step */
    /* Its latest step, for the histogram pane (/samples show K): the chain's snapshot (the top
     * SAMPLER_TOP_MAX tokens, about 1 KB, copied from each step's event), the 0-based step and
     * the conversation position; last_step -1: no step yet. */
    sampler_snapshot last;
    int last_step, last_pos;
} compare_column;

typedef struct compare_state {
    /* The armed request: */
    compare_kind pending;
    int n;                         /* beams or samples; values for COMPARE_SETTING */
    const cmd_entry *setting;      /* /compare: the sampler command whose value varies */
    char values[COMPARE_MAX_COLUMNS][32];
    /* The last run: */
    compare_kind kind;
    bool running;
    char heading[400];
    compare_column *cols;          /* (n_cols) results; during a beam search the live view */
    int n_cols, cols_cap;
    int kept;                      /* the column that is the reply now, -1: none */
    int32_t *base;                 /* (n_base) the conversation the run continued */
    int n_base;
    int step;                      /* beam search: tokens per beam so far */
    /* The histogram pane beside the columns (/samples show K): */
    int show;                      /* 1-based column whose latest step the pane shows; 0: off
                                      (the columns cover the pane, as before) */
    bool reopen;                   /* /samples show K asked to see the last run's columns again
                                      (compare_take_reopen) */
} compare_state;

/* What a front end lends a run: frame draws the board now (the TUI; NULL in line mode), stop
 * returns true when the user asked to stop (Ctrl-C), pace holds each step (below). */
typedef struct {
    void (*frame)(void *user);
    bool (*stop)(void *user);
    /* pace (NULL: none) is called after each step of the run (a beam step, a batched step of
     * the samples or columns): the front end shows it and holds it to its /pace rate */
    void (*pace)(void *user);
    void *user;
} compare_hooks;

void compare_init(compare_state *c);
void compare_free(compare_state *c);   /* NULL is safe */

/* /beam, /samples, /compare and /keep; a front end that offers them adds this module with
 * cmd_env_add_module, which makes its compare_state. */
extern const cmd_module compare_cmd_module;

/* e's compare_state (the armed request and the last run); NULL when compare_cmd_module is not
 * added to e. */
compare_state *compare_cmd_of(const cmd_env *e);

/* The /beam, /samples, /compare and /keep handlers (compare_cmd_module's rows). */
int compare_exec_beam(cmd_env *e, const cmd_entry *cmd, int argc, char **argv);
int compare_exec_samples(cmd_env *e, const cmd_entry *cmd, int argc, char **argv);
int compare_exec_compare(cmd_env *e, const cmd_entry *cmd, int argc, char **argv);
int compare_exec_keep(cmd_env *e, const cmd_entry *cmd, int argc, char **argv);

/* A one-line description of the armed request ("next line: beam search, 4 beams"), or NULL. */
const char *compare_pending_line(const compare_state *c, char *buf, size_t cap);

/* Runs the armed request on a typed line (as cmd_prompt_text makes it a turn). The message for
 * the transcript or stderr (ranking, how to keep, or the error) is in e->out; returns CMD_*
 * flags (CMD_ERROR with the conversation as it was). The request is disarmed either way. */
int compare_run(cmd_env *e, const char *text, const compare_hooks *h);

/* The board for ui_columns_draw: up to cap columns (at least 2 * COMPARE_MAX_BEAMS fills any
 * run) and the heading. */
int compare_board(const compare_state *c, ui_column *cols, int cap, const char **heading);

/* The column the histogram pane shows (/samples show K): true with its latest step's snapshot,
 * step, position and label when a column is chosen and has taken a step; false otherwise (show
 * off, or the column has no step yet). Pointers stay valid until the next run or command. */
bool compare_shown(const compare_state *c, const sampler_snapshot **snap, int *step, int *pos,
                   const char **label);

/* True once after /samples show K (or off) when the last run's columns exist: the front end
 * shows the columns again (a typed line closes them). Clears the request. */
bool compare_take_reopen(compare_state *c);

/* The plain-text rendering (line mode): a header line per column with its figures, then its text. */
void compare_print(const compare_state *c, FILE *out);

#endif
