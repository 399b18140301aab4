/* cli.h: command-line options shared by the REPL and the subcommands, and loading what they name
 * (model, tokenizer, engine, session). */
#ifndef TOKENTOP_CLI_H
#define TOKENTOP_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/session/session.h"

typedef struct {
    const char *model_dir;     /* --model */
    const char *draft_dir;     /* --draft */
    const char *backend;       /* --backend cpu|cuda|auto */
    tt_dtype dtype;            /* --dtype */
    bool dtype_set;
    tt_dtype compare_dtype;    /* --compare-dtype: a second engine at this precision */
    bool compare_set;
    int n_threads;             /* --threads */
    int n_ctx;                 /* --ctx */
    int gamma;                 /* --gamma (speculative draft length) */
    bool gamma_adaptive;       /* gamma chosen from measured costs (default; --gamma auto or
                                  --gamma-adaptive); --gamma N alone fixes it */
    double pace;               /* --pace: tokens per second shown, 0 = engine speed (also when
                                  not given: < 0) */
    bool spec_off;             /* --spec off: load the --draft but start with speculation off */
    unsigned given;            /* CLI_GIVEN_* bits: sampler settings given on the command line */
    bool no_graphs;            /* --no-graphs (CUDA) */
    session_settings set;      /* sampler, -n, --min-tokens, --stop, --seed, --context-keep */
    const char *stops[SESSION_MAX_STOPS];
    int n_stops;
    bool seed_set;
    const char *prompt;        /* -p */
    const char *prompt_file;   /* -f */
    const char *prompt_ids;    /* --ids 1,2,3 */
    bool json;                 /* --json */
    bool lens;                 /* --lens: --json records carry the logit lens */
    int attention;             /* --attention / --attn: CLI_ATTENTION_* */
    bool echo;                 /* --echo: print the prompt before the continuation */
    bool quiet;                /* -q: no summary line */
    bool verbose;              /* -v: the backend chosen, and why, on stderr */
    const char *dump_logits;   /* score --dump-logits */
    bool bos;                  /* score --bos: prepend the beginning-of-text token */
    int window;                /* score --window */
    /* generate: beam search and parallel samples (0 = off) */
    int num_beams;             /* --num-beams */
    float length_penalty;      /* --length-penalty (default 1) */
    int no_repeat_ngram;       /* --no-repeat-ngram */
    bool early_stopping;       /* --early-stopping */
    int num_return;            /* --num-return (0: all beams) */
    bool beam_option_given;    /* one of the four above: needs --num-beams */
    int samples;               /* --samples */
    const char *chat_template; /* --chat-template: a chat format's name or "off"; NULL: the
                                  model's template decides */
} cli_options;

enum {
    CLI_GIVEN_TEMP = 1u << 0, CLI_GIVEN_TOP_K = 1u << 1, CLI_GIVEN_TOP_P = 1u << 2,
    CLI_GIVEN_REPEAT = 1u << 3, CLI_GIVEN_GREEDY = 1u << 4, CLI_GIVEN_MAX = 1u << 5,
};

enum { CLI_ATTENTION_OFF = 0, CLI_ATTENTION_AVG, CLI_ATTENTION_LAYERS };

/* Defaults: embedded model, auto backend, dtype from the file, sampler defaults. */
void cli_options_default(cli_options *o);

/* Parses argv[first..]; on error prints "tokentop <cmd>: <message>" to stderr and returns -1.
 * Returns 1 when --help was printed, 0 otherwise. allow_positional: bare words are an error. */
int cli_parse(cli_options *o, const char *cmd, int argc, char **argv, int first);

/* Prints the option reference for cmd. */
void cli_usage(FILE *f, const char *cmd);

/* The model directory to use: --model, else $TOKENTOP_MODEL, else the embedded default found
 * beside the binary (a checkout: ./tokentop, build/tokentop), in the binary's ../share/tokentop
 * (an installed tree), in $XDG_DATA_HOME/tokentop or $XDG_DATA_DIRS/tokentop, or in the working
 * directory; NULL when none. */
const char *cli_model_dir(const cli_options *o);

/* The embedded draft (models/kjv-draft) beside the embedded target that cli_model_dir found,
 * when no --model and no $TOKENTOP_MODEL chose another model; NULL otherwise or when absent. */
const char *cli_default_draft_dir(const cli_options *o);

/* Everything a run needs, loaded from the options. */
typedef struct {
    model *model;
    tokenizer *tok;
    engine *eng;
    char backend_note[512];    /* why --backend auto uses the CPU, e.g. "cuda: no CUDA driver
                                  (libcuda.so.1: ...); using the CPU"; "" otherwise. Printed only
                                  with -v; the REPL shows it in the status bar and /show */
    engine_options eopts;      /* what eng was created with */
    bool fallback_quiet;       /* cli_device_fallback leaves its note in fallback_note only */
    char fallback_note[320];   /* set by cli_device_fallback; the front end shows and clears it */
    chat_spec chat;            /* the chat format to start in (--chat-template, else the model's) */
    chat_spec chat_model;      /* the model's own (its chat template's; raw when none matches) */
} cli_app;

/* Loads model + tokenizer (+ engine unless tokenizer_only) from what o names: a model directory,
 * a GGUF file or the NAME[:TAG] of a model Ollama pulled (cli_model_dir). Warnings (a generation
 * config or chat template it ignores, a conversion made on loading) go to notes, one line each
 * ending in a newline (notes_cap bytes; lines that do not fit are cut). On failure err says what
 * was tried and why, and everything loaded so far is freed; nothing is printed. */
tt_status cli_app_open(cli_app *app, const cli_options *o, bool tokenizer_only, char *notes,
                       size_t notes_cap, tt_error *err);

/* Appends a line and its newline to notes, a string of cap bytes (cli_app_open's warnings); a line
 * that does not fit is cut. */
void cli_notes_add(char *notes, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* cli_app_open for the command line: the notes, the error and, with -v, the engine chosen are
 * printed to stderr ("tokentop: ..."). Returns cli_app_open's status. */
tt_status cli_app_load(cli_app *app, const cli_options *o, bool tokenizer_only);
void cli_app_free(cli_app *app);

/* An engine over m like `like` (its backend and n_ctx; threads and the rest from o) holding
 * weights in d: /dtype and --compare-dtype. Fails, with nothing made, when like's backend cannot
 * hold d (e.g. "cuda: --dtype q8 runs on the CPU only ...") instead of falling back to the CPU. */
tt_status cli_create_engine_like(const model *m, const cli_options *o, const engine *like,
                                 tt_dtype d, engine **out, tt_error *err);

/* A session_fallback_fn (user = the cli_app): after a device error, continue on a CPU engine with
 * the same options; frees the failed engine when it is app->eng. Writes a note saying so to
 * fallback_note, and to stderr unless fallback_quiet. */
struct session;
engine *cli_device_fallback(void *app, struct session *s, engine *failed, const tt_error *why);

/* Applies the model's generation_config.json (temperature, top_k, top_p, repetition_penalty,
 * do_sample false = greedy, max_new_tokens) to the settings the command line did not give, the way
 * Hugging Face's generate() starts from a model's generation config. Values the sampler would
 * refuse are skipped with a warning on stderr. Without --seed, the seed is rng_clock_seed(). */
void cli_apply_generation_defaults(cli_options *o, const model *m);

/* The chat mode app->chat (raw: plain continuation), with the model's own format kept for
 * /chat on and the tokenizer's special tokens: into *out, or onto session s. */
void cli_chat_config(const cli_app *app, session_chat *out);
void cli_session_chat(const cli_app *app, session *s);

/* The GPU plugin (gpu/gpu_plugin.h: gpu_plugin_load), looked for beside this binary and in its
 * ../lib/tokentop; NULL with the reason in why (cap bytes). */
struct gpu_plugin;
const struct gpu_plugin *cli_gpu_plugin(char *why, size_t cap);

/* The precision an engine holds m in when none is asked for: the file's (m->file_dtype), except
 * that a GPU engine (gpu) holds a GGUF's Q8_0 blocks, the CPU's repacked q8 by default, as
 * stored (TT_GGUF): it dequantizes them at upload as it does every other GGUF type's. */
tt_dtype cli_default_dtype(const model *m, bool gpu);

/* Creates the engine for backend "cpu" | "cuda" | "auto". cuda and auto open the GPU plugin
 * (gpu/gpu_plugin.h; "cpu" never does, so it maps no CUDA library). auto: the GPU when a device is
 * usable, otherwise the CPU, with the reason in note (the caller decides where to show it). cuda:
 * TT_ERR_DEVICE "--backend cuda: <why>" when no device is usable. */
tt_status cli_create_engine(const model *m, const cli_options *o, engine **out, char *note,
                            size_t note_cap, tt_error *err);

/* Parses "1,2,3" into a malloc'd array of *n ids in [0, V); -1 with the reason in why (which
 * id, which value) otherwise. */
int cli_parse_ids(const char *s, int V, int32_t **ids, int *n, char *why, size_t cap);

#endif
