/* cli.c: shared command-line options, and loading the model, tokenizer and engine they name. */
#include "app/cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/decode/beam.h"
#include "core/base/util.h"
#include "core/model/ollama.h"
#include "core/decode/pace.h"
#include "gpu/gpu_plugin.h"

#define DEFAULT_MODEL_NAME "models/kjv-target"
#define DEFAULT_DRAFT_NAME "models/kjv-draft"

void cli_options_default(cli_options *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->dtype = TT_F32;
    o->gamma = 4;
    o->gamma_adaptive = true;
    o->pace = -1;
    o->length_penalty = 1.0f;
    session_settings_default(&o->set);
}

/* ---------------------------------------------------------------------------------------------
 * Option table: one row per option; sampler options go through sampler_params_set so the CLI and
 * the slash-commands validate the same way. */

enum {
    OPT_MODEL = 'm', OPT_PROMPT = 'p', OPT_FILE = 'f', OPT_MAX = 'n', OPT_THREADS = 't',
    OPT_SEED = 's', OPT_QUIET = 'q', OPT_VERBOSE = 'v', OPT_HELP = 'h',
    OPT_DRAFT = 256, OPT_BACKEND, OPT_DTYPE, OPT_CTX, OPT_GAMMA, OPT_GAMMA_ADAPTIVE, OPT_PACE, OPT_SPEC, OPT_NO_GRAPHS,
    OPT_TEMP, OPT_TOP_K, OPT_TOP_P, OPT_MIN_P, OPT_REPEAT, OPT_PRESENCE, OPT_FREQUENCY,
    OPT_WINDOW, OPT_ORDER, OPT_GREEDY, OPT_MIN_TOKENS, OPT_STOP, OPT_CONTEXT_KEEP,
    OPT_NO_SHIFT, OPT_JSON, OPT_ECHO, OPT_DUMP_LOGITS, OPT_BOS, OPT_CHUNK, OPT_IGNORE_EOS,
    OPT_NUM_BEAMS, OPT_LENGTH_PENALTY, OPT_NO_REPEAT_NGRAM, OPT_EARLY_STOPPING, OPT_NUM_RETURN,
    OPT_SAMPLES, OPT_COMPARE_DTYPE, OPT_IDS, OPT_CHAT_TEMPLATE,
    OPT_LENS, OPT_ATTENTION,
};

static const struct option long_options[] = {
    {"model", required_argument, 0, OPT_MODEL},
    {"draft", required_argument, 0, OPT_DRAFT},
    {"backend", required_argument, 0, OPT_BACKEND},
    {"dtype", required_argument, 0, OPT_DTYPE},
    {"compare-dtype", required_argument, 0, OPT_COMPARE_DTYPE},
    {"threads", required_argument, 0, OPT_THREADS},
    {"ctx", required_argument, 0, OPT_CTX},
    {"gamma", required_argument, 0, OPT_GAMMA},
    {"gamma-adaptive", no_argument, 0, OPT_GAMMA_ADAPTIVE},
    {"pace", required_argument, 0, OPT_PACE},
    {"spec", required_argument, 0, OPT_SPEC},
    {"no-graphs", no_argument, 0, OPT_NO_GRAPHS},
    {"temp", required_argument, 0, OPT_TEMP},
    {"temperature", required_argument, 0, OPT_TEMP},
    {"top-k", required_argument, 0, OPT_TOP_K},
    {"top-p", required_argument, 0, OPT_TOP_P},
    {"min-p", required_argument, 0, OPT_MIN_P},
    {"repeat", required_argument, 0, OPT_REPEAT},
    {"repeat-penalty", required_argument, 0, OPT_REPEAT},
    {"presence", required_argument, 0, OPT_PRESENCE},
    {"presence-penalty", required_argument, 0, OPT_PRESENCE},
    {"frequency", required_argument, 0, OPT_FREQUENCY},
    {"frequency-penalty", required_argument, 0, OPT_FREQUENCY},
    {"window", required_argument, 0, OPT_WINDOW},
    {"order", required_argument, 0, OPT_ORDER},
    {"greedy", no_argument, 0, OPT_GREEDY},
    {"seed", required_argument, 0, OPT_SEED},
    {"max-tokens", required_argument, 0, OPT_MAX},
    {"min-tokens", required_argument, 0, OPT_MIN_TOKENS},
    {"ignore-eos", no_argument, 0, OPT_IGNORE_EOS},
    {"stop", required_argument, 0, OPT_STOP},
    {"context-keep", required_argument, 0, OPT_CONTEXT_KEEP},
    {"no-context-shift", no_argument, 0, OPT_NO_SHIFT},
    {"prompt", required_argument, 0, OPT_PROMPT},
    {"ids", required_argument, 0, OPT_IDS},
    {"file", required_argument, 0, OPT_FILE},
    {"json", no_argument, 0, OPT_JSON},
    {"lens", no_argument, 0, OPT_LENS},
    {"echo", no_argument, 0, OPT_ECHO},
    {"quiet", no_argument, 0, OPT_QUIET},
    {"verbose", no_argument, 0, OPT_VERBOSE},
    {"dump-logits", required_argument, 0, OPT_DUMP_LOGITS},
    {"bos", no_argument, 0, OPT_BOS},
    {"chunk", required_argument, 0, OPT_CHUNK},
    {"num-beams", required_argument, 0, OPT_NUM_BEAMS},
    {"length-penalty", required_argument, 0, OPT_LENGTH_PENALTY},
    {"no-repeat-ngram", required_argument, 0, OPT_NO_REPEAT_NGRAM},
    {"early-stopping", no_argument, 0, OPT_EARLY_STOPPING},
    {"num-return", required_argument, 0, OPT_NUM_RETURN},
    {"samples", required_argument, 0, OPT_SAMPLES},
    {"chat-template", required_argument, 0, OPT_CHAT_TEMPLATE},
    {"attention", optional_argument, 0, OPT_ATTENTION},
    {"attn", optional_argument, 0, OPT_ATTENTION},
    {"help", no_argument, 0, OPT_HELP},
    {0, 0, 0, 0},
};

void cli_usage(FILE *f, const char *cmd)
{
    if (strcmp(cmd, "tokenize") == 0) {
        fprintf(f,
"usage: tokentop tokenize [--model DIR] [-p TEXT | -f FILE] [--json]\n"
"  Prints the tokens the model sees for TEXT, FILE or standard input, the BOS first when the\n"
"  tokenizer adds one (only the tokenizer's files are read: tokenizer.json, or vocab.json and\n"
"  merges.txt; tokenizer_config.json). --json: a JSON array of ids; otherwise one line per\n"
"  token: id, then the token as the histogram shows it (\xe2\x90\xa3 a leading space, \\xNN a lone\n"
"  byte, \xe2\x9f\xa8\xe2\x9f\xa9 around a special token).\n");
        return;
    }
    if (strcmp(cmd, "score") == 0) {
        fprintf(f,
"usage: tokentop score [--model DIR] (-f FILE | --ids 1,2,3) [--chunk N] [--bos] [--json]\n"
"                      [--dump-logits OUT]\n"
"  Mean negative log-likelihood, perplexity and bits per byte (the total NLL in bits over FILE's\n"
"  bytes) of FILE under the model. The tokens are cut into\n"
"  consecutive chunks of N+1 tokens overlapping by one (default N = the context size): each chunk\n"
"  is run from position 0 and predicts its last N tokens. --bos prepends the beginning-of-text\n"
"  token. --dump-logits writes the logits of every predicted position as raw float32 rows of\n"
"  vocab_size values (little-endian), in order. --ids scores those token ids as given (no\n"
"  tokenizer, no bits per byte): the ids another engine was given, to compare the logits.\n"
"  Also: --dtype, --threads, --backend, --ctx, -v.\n");
        return;
    }
    fprintf(f,
"usage: tokentop %s [options]\n"
"Model and engine:\n"
"  -m, --model DIR        Hugging Face model directory: GPT-2, Llama, Mistral, Qwen2/3 (default:\n"
"                         the embedded %s)\n"
"      --dtype T          precision weights are held in: fp32 | fp16 | bf16 | q8 | gguf (default:\n"
"                         the file's; gguf: a GGUF's tensors as stored, F16 or quantized)\n"
"      --compare-dtype T  run a second engine at precision T on the same tokens: --json records\n"
"                         get a \"compare\" object (p under both, KL, max |dp|, top-1), the REPL\n"
"                         starts with /dtype compare T (twice the weight memory)\n"
"      --backend B        cpu | cuda | auto (default auto: the GPU when one is usable)\n"
"  -t, --threads N        CPU threads (default auto: one per core, 1 while more are slower)\n"
"      --ctx N            KV cache positions (default: the model's, 4096 at most)\n"
"      --draft DIR        draft model for speculative decoding\n"
"      --gamma N|auto     draft tokens per round (default auto: chosen from the measured draft\n"
"                         and verification costs and the running acceptance; starts at 4)\n"
"      --gamma-adaptive   auto, starting from --gamma N\n"
"      --spec on|off      start with speculative decoding on (default, with --draft) or off\n"
"      --pace N           show at most N tokens per second, to follow the histogram (0: as\n"
"                         fast as the engine goes; default 20 in the terminal UI, 0 elsewhere)\n"
"      --no-graphs        GPU: launch the decode step's kernels one by one (no CUDA graph)\n"
"Sampling (Hugging Face order by default: penalties, temperature, top-k, top-p, min-p):\n"
"      --temp X           temperature >= 0 (0 = greedy)       --greedy      always the argmax\n"
"      --top-k N          keep the N most likely (0 = off)    --top-p X     nucleus mass in [0,1]\n"
"      --min-p X          keep p >= X * p_max, X in [0,1]     --order O     hf | llama\n"
"      --repeat X         repetition penalty > 0 (1 = off)    --presence X  --frequency X\n"
"      --window N         tokens the penalties look back (-1 = all, default 64)\n"
"  -s, --seed N           PRNG seed (same seed and settings, same tokens; with --draft\n"
"                         the same whatever --gamma, not the same as without a draft)\n"
"Generation:\n"
"  -p, --prompt TEXT      prompt text                         -f, --file F  prompt from a file\n"
"      --ids 1,2,3        the prompt as token ids (what tokenize --json prints; no BOS added)\n"
"  -n, --max-tokens N     new tokens at most (default 128)    --min-tokens N  no EOS before N\n"
"      --stop S           stop string (repeatable, excluded from the output)\n"
"      --ignore-eos       keep generating past the end-of-text token\n"
"      --context-keep F   fraction of the context kept when it fills (default 0.5)\n"
"      --no-context-shift stop when the context is full instead\n"
"      --json             one JSON object per token, then a summary object\n"
"      --lens             with --json: each record gets the logit lens, layer by layer the top 5\n"
"                         tokens and the drawn token's probability and rank (docs/lens.md)\n"
"      --attention [avg|layers]  with --json: each record adds the earlier tokens the step\n"
"                         attended to most (\"attention\": mean over layers and heads;\n"
"                         layers: \"attention_layers\", one list per layer); in the REPL\n"
"                         (also --attn) the attention view starts on (/attn)\n"
"      --echo             print the prompt before the continuation\n"
"      --chat-template F  chat format of the prompt: chatml | llama3 | llama2 | mistral |\n"
"                         zephyr | off (default: the model's chat template, when it has one)\n"
"  -q, --quiet            no summary line on stderr\n"
"  -v, --verbose          say on stderr which backend runs and why (--backend auto)\n"
"Beam search and parallel samples (generate):\n"
"      --num-beams N      beam search with N beams (Hugging Face semantics; sampling settings\n"
"                         other than the penalties do not apply)\n"
"      --length-penalty X hypothesis score = logprob / length^X (default 1)\n"
"      --no-repeat-ngram N  no n-gram of N tokens occurs twice    --early-stopping\n"
"      --num-return N     beams returned, best first: N > 1 prints each under a line with\n"
"                         its rank and score (default: the best printed, --json lists all)\n"
"      --samples N        N samples in one batch: sample i = the run with --seed S+i\n",
            cmd, DEFAULT_MODEL_NAME);
}

static int parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, int *out)
{
    long v;
    if (util_parse_long(s, lo, hi, &v) != UTIL_PARSE_OK) {
        fprintf(stderr, "tokentop %s: %s: '%s' is not an integer in [%ld, %ld]\n", cmd, opt, s,
                lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_float(const char *cmd, const char *opt, const char *s, double lo, double hi,
                       float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "tokentop %s: %s: '%s' is not a number in [%g, %g]\n", cmd, opt, s, lo,
                hi);
        return -1;
    }
    *out = (float)v;
    return 0;
}

static int parse_dtype(const char *cmd, const char *opt, const char *s, tt_dtype *out)
{
    if (tt_dtype_parse(s, out) != 0) {
        fprintf(stderr, "tokentop %s: %s: '%s' is not fp32, fp16, bf16 or q8\n", cmd, opt, s);
        return -1;
    }
    return 0;
}

int cli_parse_ids(const char *s, int V, int32_t **ids, int *n, char *why, size_t cap)
{
    *ids = NULL;
    *n = 0;
    int count = 1;
    for (const char *p = s; *p; p++)
        count += *p == ',';
    int32_t *v = malloc((size_t)count * sizeof *v);
    if (!v) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    const char *p = s;
    for (int i = 0; i < count; i++) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || (*end && *end != ',')) {
            snprintf(why, cap, "id %d: '%.*s' is not an integer", i + 1,
                     (int)strcspn(p, ","), p);
            free(v);
            return -1;
        }
        if (x < 0 || x >= V) {
            snprintf(why, cap, "id %d: %ld is outside the vocabulary [0, %d)", i + 1, x, V);
            free(v);
            return -1;
        }
        v[i] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    *ids = v;
    *n = count;
    return 0;
}

static int set_sampler(cli_options *o, const char *cmd, const char *name, const char *value)
{
    tt_error err;
    if (sampler_params_set(&o->set.sampler, name, value, &err) != TT_OK) {
        fprintf(stderr, "tokentop %s: %s\n", cmd, err.msg);
        return -1;
    }
    return 0;
}

int cli_parse(cli_options *o, const char *cmd, int argc, char **argv, int first)
{
    /* getopt keeps hidden state (where it is inside a cluster such as -qx) from the last call;
     * only optind = 0 resets it, and then it starts at element 1. So parse argv[first - 1 ..],
     * with argv[first - 1] in the program name's place. */
    argc -= first - 1;
    argv += first - 1;
    optind = 0;
    opterr = 0;
    int c, idx;
    bool adaptive_given = false;   /* --gamma auto / --gamma-adaptive win over --gamma N */
    while ((c = getopt_long(argc, argv, ":m:p:f:n:t:s:qvh", long_options, &idx)) != -1) {
        const char *a = optarg;
        int r = 0;
        switch (c) {
        case OPT_MODEL: o->model_dir = a; break;
        case OPT_DRAFT: o->draft_dir = a; break;
        case OPT_BACKEND:
            if (strcmp(a, "cpu") && strcmp(a, "cuda") && strcmp(a, "auto")) {
                fprintf(stderr, "tokentop %s: --backend: '%s' is not cpu, cuda or auto\n", cmd, a);
                return -1;
            }
            o->backend = a;
            break;
        case OPT_DTYPE:
            r = parse_dtype(cmd, "--dtype", a, &o->dtype);
            o->dtype_set = true;
            break;
        case OPT_COMPARE_DTYPE:
            r = parse_dtype(cmd, "--compare-dtype", a, &o->compare_dtype);
            o->compare_set = true;
            break;
        case OPT_THREADS: r = parse_int(cmd, "--threads", a, 1, 1024, &o->n_threads); break;
        case OPT_CTX: r = parse_int(cmd, "--ctx", a, 2, 1 << 20, &o->n_ctx); break;
        case OPT_GAMMA:
            if (strcmp(a, "auto") == 0) {
                adaptive_given = true;
                break;
            }
            r = parse_int(cmd, "--gamma", a, 1, SPEC_GAMMA_MAX, &o->gamma);
            o->gamma_adaptive = false;
            break;
        case OPT_GAMMA_ADAPTIVE: adaptive_given = true; break;
        case OPT_PACE: {
            tt_error err;
            if (pace_parse(a, &o->pace, &err) != TT_OK) {
                fprintf(stderr, "tokentop %s: --%s\n", cmd, err.msg);
                return -1;
            }
            break;
        }
        case OPT_SPEC:
            if (strcmp(a, "on") && strcmp(a, "off")) {
                fprintf(stderr, "tokentop %s: --spec: '%s' is not on or off\n", cmd, a);
                return -1;
            }
            o->spec_off = strcmp(a, "off") == 0;
            break;
        case OPT_NO_GRAPHS: o->no_graphs = true; break;
        case OPT_TEMP: r = set_sampler(o, cmd, "temp", a); o->given |= CLI_GIVEN_TEMP; break;
        case OPT_TOP_K: r = set_sampler(o, cmd, "top_k", a); o->given |= CLI_GIVEN_TOP_K; break;
        case OPT_TOP_P: r = set_sampler(o, cmd, "top_p", a); o->given |= CLI_GIVEN_TOP_P; break;
        case OPT_MIN_P: r = set_sampler(o, cmd, "min_p", a); break;
        case OPT_REPEAT: r = set_sampler(o, cmd, "repeat", a); o->given |= CLI_GIVEN_REPEAT; break;
        case OPT_PRESENCE: r = set_sampler(o, cmd, "presence", a); break;
        case OPT_FREQUENCY: r = set_sampler(o, cmd, "frequency", a); break;
        case OPT_WINDOW: r = set_sampler(o, cmd, "window", a); break;
        case OPT_ORDER: r = set_sampler(o, cmd, "order", a); break;
        case OPT_GREEDY: o->set.sampler.greedy = true; o->given |= CLI_GIVEN_GREEDY; break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(a, &end, 10);
            if (errno || end == a || *end || a[0] == '-') {
                fprintf(stderr, "tokentop %s: --seed: '%s' is not a non-negative integer\n", cmd, a);
                return -1;
            }
            o->set.seed = v;
            o->seed_set = true;
            break;
        }
        case OPT_MAX:
            r = parse_int(cmd, "--max-tokens", a, 1, 1 << 24, &o->set.max_new_tokens);
            o->given |= CLI_GIVEN_MAX;
            break;
        case OPT_MIN_TOKENS: r = parse_int(cmd, "--min-tokens", a, 0, 1 << 24, &o->set.min_tokens); break;
        case OPT_IGNORE_EOS: o->set.stop_at_eos = false; break;
        case OPT_STOP:
            if (!*a) {
                fprintf(stderr, "tokentop %s: --stop: the stop string must not be empty\n", cmd);
                return -1;
            }
            if (o->n_stops >= SESSION_MAX_STOPS) {
                fprintf(stderr, "tokentop %s: --stop: at most %d stop strings\n", cmd,
                        SESSION_MAX_STOPS);
                return -1;
            }
            o->stops[o->n_stops++] = a;
            break;
        case OPT_CONTEXT_KEEP:
            r = parse_float(cmd, "--context-keep", a, 0.01, 0.99, &o->set.context_keep);
            break;
        case OPT_NO_SHIFT: o->set.context_shift = false; break;
        case OPT_PROMPT: o->prompt = a; break;
        case OPT_IDS: o->prompt_ids = a; break;
        case OPT_FILE: o->prompt_file = a; break;
        case OPT_JSON: o->json = true; break;
        case OPT_LENS: o->lens = true; break;
        case OPT_ECHO: o->echo = true; break;
        case OPT_QUIET: o->quiet = true; break;
        case OPT_VERBOSE: o->verbose = true; break;
        case OPT_DUMP_LOGITS: o->dump_logits = a; break;
        case OPT_BOS: o->bos = true; break;
        case OPT_CHUNK: r = parse_int(cmd, "--chunk", a, 1, 1 << 20, &o->window); break;
        case OPT_NUM_BEAMS: r = parse_int(cmd, "--num-beams", a, 1, BEAM_MAX, &o->num_beams); break;
        case OPT_LENGTH_PENALTY:
            r = parse_float(cmd, "--length-penalty", a, -1e3, 1e3, &o->length_penalty);
            o->beam_option_given = true;
            break;
        case OPT_NO_REPEAT_NGRAM:
            r = parse_int(cmd, "--no-repeat-ngram", a, 0, 1 << 16, &o->no_repeat_ngram);
            o->beam_option_given = true;
            break;
        case OPT_EARLY_STOPPING: o->early_stopping = o->beam_option_given = true; break;
        case OPT_NUM_RETURN:
            r = parse_int(cmd, "--num-return", a, 1, BEAM_MAX, &o->num_return);
            o->beam_option_given = true;
            break;
        case OPT_SAMPLES: r = parse_int(cmd, "--samples", a, 1, 256, &o->samples); break;
        case OPT_CHAT_TEMPLATE: {
            chat_format f;
            if (strcmp(a, "off") != 0 && !chat_format_from_name(a, &f)) {
                fprintf(stderr, "tokentop %s: --chat-template: \"%s\" is not a chat format (%s, "
                        "or off)\n", cmd, a, chat_format_list());
                r = -1;
            }
            o->chat_template = a;
            break;
        }
        case OPT_ATTENTION:
            /* --attention, --attention avg|layers or --attention=avg|layers */
            if (!a && optind < argc && argv[optind] &&
                (strcmp(argv[optind], "avg") == 0 || strcmp(argv[optind], "layers") == 0))
                a = argv[optind++];
            if (!a || strcmp(a, "avg") == 0) {
                o->attention = CLI_ATTENTION_AVG;
            } else if (strcmp(a, "layers") == 0) {
                o->attention = CLI_ATTENTION_LAYERS;
            } else {
                fprintf(stderr, "tokentop %s: --attention: '%s' is not avg or layers\n", cmd, a);
                r = -1;
            }
            break;
        case OPT_HELP: cli_usage(stdout, cmd); return 1;
        case ':':
            fprintf(stderr, "tokentop %s: %s needs a value\n", cmd, argv[optind - 1]);
            return -1;
        default:
            fprintf(stderr, "tokentop %s: unknown option '%s' (see tokentop %s --help)\n", cmd,
                    argv[optind - 1], cmd);
            return -1;
        }
        if (r)
            return -1;
    }
    if (adaptive_given)
        o->gamma_adaptive = true;
    if (optind < argc) {
        fprintf(stderr, "tokentop %s: unexpected argument '%s' (prompts go after -p)\n", cmd,
                argv[optind]);
        return -1;
    }
    if ((o->prompt != NULL) + (o->prompt_file != NULL) + (o->prompt_ids != NULL) > 1) {
        fprintf(stderr, "tokentop %s: give one of -p, -f and --ids\n", cmd);
        return -1;
    }
    if (o->prompt_ids && o->samples) {
        fprintf(stderr, "tokentop %s: --ids does not combine with --samples (give the prompt as "
                "text)\n", cmd);
        return -1;
    }
    if (o->beam_option_given && !o->num_beams) {
        fprintf(stderr, "tokentop %s: --length-penalty, --no-repeat-ngram, --early-stopping and "
                "--num-return need --num-beams N\n", cmd);
        return -1;
    }
    if (o->num_return > 0 && o->num_return > o->num_beams) {
        fprintf(stderr, "tokentop %s: --num-return: %d is more than the %d beams\n", cmd,
                o->num_return, o->num_beams);
        return -1;
    }
    if ((o->num_beams || o->samples) && o->draft_dir) {
        fprintf(stderr, "tokentop %s: --%s does not combine with --draft (speculative decoding)\n",
                cmd, o->num_beams ? "num-beams" : "samples");
        return -1;
    }
    if (o->num_beams && o->samples) {
        fprintf(stderr, "tokentop %s: give either --num-beams or --samples, not both\n", cmd);
        return -1;
    }
    if (o->num_beams && o->n_stops) {
        fprintf(stderr, "tokentop %s: --stop does not apply to beam search (beams end at EOS or "
                "--max-tokens)\n", cmd);
        return -1;
    }
    tt_error err;
    if (sampler_params_validate(&o->set.sampler, &err) != TT_OK) {
        fprintf(stderr, "tokentop %s: %s\n", cmd, err.msg);
        return -1;
    }
    return 0;
}

void cli_apply_generation_defaults(cli_options *o, const model *m)
{
    const model_generation_defaults *g = &m->gen;
    sampler_params p = o->set.sampler;
    char v[32];
    struct { bool has; unsigned bit; const char *name; double value; bool integer; } rows[] = {
        {g->has_temperature, CLI_GIVEN_TEMP, "temp", g->temperature, false},
        {g->has_top_k, CLI_GIVEN_TOP_K, "top_k", g->top_k, true},
        {g->has_top_p, CLI_GIVEN_TOP_P, "top_p", g->top_p, false},
        {g->has_rep_penalty, CLI_GIVEN_REPEAT, "repeat", g->repetition_penalty, false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!rows[i].has || (o->given & rows[i].bit))
            continue;
        snprintf(v, sizeof v, rows[i].integer ? "%.0f" : "%.9g", rows[i].value);
        tt_error err;
        if (sampler_params_set(&p, rows[i].name, v, &err) != TT_OK)
            fprintf(stderr, "tokentop: %s/generation_config.json: %s (ignored)\n", m->dir, err.msg);
    }
    if (g->has_do_sample && !g->do_sample && !(o->given & (CLI_GIVEN_GREEDY | CLI_GIVEN_TEMP)))
        p.greedy = true;
    o->set.sampler = p;
    if (g->has_max_new_tokens && g->max_new_tokens > 0 && !(o->given & CLI_GIVEN_MAX))
        o->set.max_new_tokens = g->max_new_tokens;
    /* An Ollama params layer's stop strings, unless --stop names some (beams take none). */
    if (!o->n_stops && !o->num_beams)
        for (int i = 0; i < m->n_stop_strings && o->n_stops < SESSION_MAX_STOPS; i++)
            if (m->stop_strings[i][0])
                o->stops[o->n_stops++] = m->stop_strings[i];
    if (!o->seed_set)
        o->set.seed = rng_clock_seed();
}

/* ---------------------------------------------------------------------------------------------
 * Loading */

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The directory of the running binary (no trailing slash), into out; false when unknown. */
static bool exe_dir(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0)
        return false;
    out[n] = 0;
    char *slash = strrchr(out, '/');
    if (!slash)
        return false;
    *slash = 0;
    return true;
}

/* base/tokentop/models/kjv-target, into path, when it is a directory: an installed data tree. */
static bool find_in_data_dir(const char *base, size_t len, char *path, size_t cap)
{
    if (len == 0 || base[0] != '/')      /* XDG: relative entries are to be ignored */
        return false;
    snprintf(path, cap, "%.*s/tokentop/%s", (int)len, base, DEFAULT_MODEL_NAME);
    return is_dir(path);
}

const char *cli_model_dir(const cli_options *o)
{
    if (o->model_dir)
        return o->model_dir;
    const char *env = getenv("TOKENTOP_MODEL");
    if (env && *env)
        return env;
    static char path[2 * PATH_MAX];
    char exe[PATH_MAX];
    if (exe_dir(exe, sizeof exe)) {
        /* ./tokentop at the repository root, build/tokentop one level down, build/asan/tokentop
         * two; then an installed tree: $PREFIX/bin/tokentop and $PREFIX/share/tokentop. */
        static const char *const rel[] = {"", "../", "../../", "../share/tokentop/"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(path, sizeof path, "%s/%s%s", exe, rel[i], DEFAULT_MODEL_NAME);
            if (is_dir(path))
                return path;
        }
    }
    /* The XDG base directories: $XDG_DATA_HOME, then each of $XDG_DATA_DIRS, with their defaults. */
    const char *home = getenv("HOME"), *data_home = getenv("XDG_DATA_HOME");
    char buf[PATH_MAX] = "";
    if (data_home && *data_home)
        snprintf(buf, sizeof buf, "%s", data_home);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.local/share", home);
    if (find_in_data_dir(buf, strlen(buf), path, sizeof path))
        return path;
    const char *dirs = getenv("XDG_DATA_DIRS");
    if (!dirs || !*dirs)
        dirs = "/usr/local/share:/usr/share";
    for (const char *d = dirs; *d;) {
        size_t len = strcspn(d, ":");
        if (find_in_data_dir(d, len, path, sizeof path))
            return path;
        d += len + (d[len] == ':');
    }
    if (is_dir(DEFAULT_MODEL_NAME))
        return DEFAULT_MODEL_NAME;
    return NULL;
}

const char *cli_default_draft_dir(const cli_options *o)
{
    const char *env = getenv("TOKENTOP_MODEL");
    if (o->model_dir || (env && *env))
        return NULL;
    const char *target = cli_model_dir(o);
    size_t n = target ? strlen(target) : 0, k = strlen(DEFAULT_MODEL_NAME);
    if (n < k || strcmp(target + n - k, DEFAULT_MODEL_NAME) != 0)
        return NULL;
    char joined[2 * PATH_MAX + 32];
    static char path[PATH_MAX];
    snprintf(joined, sizeof joined, "%.*s%s", (int)(n - k), target, DEFAULT_DRAFT_NAME);
    if (!is_dir(joined))
        return NULL;
    /* build/../models/kjv-draft reads as models/kjv-draft */
    return realpath(joined, path) ? path : NULL;
}

tt_dtype cli_default_dtype(const model *m, bool gpu)
{
    return gpu && m->gguf && m->file_dtype == TT_Q8 ? TT_GGUF : m->file_dtype;
}

static void engine_options_from(const model *m, const cli_options *o, bool gpu,
                                engine_options *eo)
{
    engine_options_default(eo);
    eo->dtype = o->dtype_set ? o->dtype : cli_default_dtype(m, gpu);
    eo->n_threads = o->n_threads;
    eo->n_ctx = o->n_ctx;
}

const gpu_plugin *cli_gpu_plugin(char *why, size_t cap)
{
    char dir[PATH_MAX];
    return gpu_plugin_load(exe_dir(dir, sizeof dir) ? dir : NULL, why, cap);
}

tt_status cli_create_engine(const model *m, const cli_options *o, engine **out, char *note,
                            size_t note_cap, tt_error *err)
{
    engine_options eo;
    engine_options_from(m, o, false, &eo);
    if (note_cap)
        note[0] = 0;
    bool want_cuda = strcmp(o->backend, "cuda") == 0;
    bool want_auto = strcmp(o->backend, "auto") == 0;
    if (want_cuda || want_auto) {
        char why[400] = "";
        const gpu_plugin *gpu = cli_gpu_plugin(why, sizeof why);
        if (gpu && gpu->backend_available(why, sizeof why)) {
            cuda_engine_options co;
            gpu->engine_options_default(&co);
            co.use_graphs = !o->no_graphs;
            engine_options geo;
            engine_options_from(m, o, true, &geo);
            tt_status st = gpu->engine_create(m, &geo, &co, out, err);
            if (st == TT_OK)
                return TT_OK;
            /* The device is there but cannot hold this model (memory, say): the CPU can. */
            const char *msg = err && err->msg[0] ? err->msg : tt_status_str(st);
            snprintf(note, note_cap, "%s%s; using the CPU", strncmp(msg, "cuda: ", 6) ? "cuda: " : "",
                     msg);
        } else if (want_cuda) {
            return tt_fail(err, TT_ERR_DEVICE, "--backend cuda: %s", why);
        } else {
            snprintf(note, note_cap, "cuda: %s; using the CPU", why);
        }
    }
    return cpu_engine_create(m, &eo, out, err);
}

tt_status cli_create_engine_like(const model *m, const cli_options *o, const engine *like,
                                 tt_dtype d, engine **out, tt_error *err)
{
    cli_options lo = *o;
    lo.backend = like->ops->name;
    lo.dtype = d;
    lo.dtype_set = true;
    lo.n_ctx = like->n_ctx;
    char note[512] = "";
    tt_status st = cli_create_engine(m, &lo, out, note, sizeof note, err);
    if (st != TT_OK || strcmp((*out)->ops->name, lo.backend) == 0)
        return st;
    /* cli_create_engine fell back to the CPU: here the precision is what was asked for, on the
     * backend the session runs on, so say why the backend refused it. */
    engine_free(*out);
    *out = NULL;
    char *tail = strstr(note, "; using the CPU");
    if (tail)
        *tail = 0;
    return tt_fail(err, TT_ERR_UNSUPPORTED, "%s", note[0] ? note : "the backend refused it");
}

void cli_notes_add(char *notes, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(notes);
    if (n + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes + n, cap - n, fmt, ap);
    va_end(ap);
    n += strlen(notes + n);
    if (n + 1 < cap) {
        notes[n] = '\n';
        notes[n + 1] = 0;
    } else {
        notes[cap - 2] = '\n';
    }
}

/* The chat format: --chat-template, else what the model directory's chat template matches (a
 * template that matches none, or a config that cannot be read, is said in notes: plain
 * continuation). */
static void load_chat(cli_app *app, const cli_options *o, const char *dir, char *notes,
                      size_t notes_cap)
{
    char warning[640];
    tt_error err = {0};
    char *gguf_template = app->model ? model_chat_template(app->model) : NULL;
    if (app->model && app->model->gguf) {
        /* A GGUF file's tokenizer.chat_template feeds the same detector. */
        app->chat_model = chat_spec_of(CHAT_RAW);
        warning[0] = 0;
        if (gguf_template && !chat_detect(gguf_template, &app->chat_model))
            snprintf(warning, sizeof warning, "%s: tokenizer.chat_template matches no built-in "
                     "chat format (%s): raw continuation", dir, chat_format_list());
        if (warning[0] && !o->chat_template)
            cli_notes_add(notes, notes_cap, "%s", warning);
    } else if (chat_spec_from_dir(dir, &app->chat_model, warning, sizeof warning, &err) != TT_OK)
        cli_notes_add(notes, notes_cap, "%s (chat mode off)", err.msg);
    else if (warning[0] && !o->chat_template)
        cli_notes_add(notes, notes_cap, "%s", warning);
    free(gguf_template);
    app->chat = app->chat_model;
    chat_format f;
    if (o->chat_template)
        app->chat = chat_format_from_name(o->chat_template, &f)
                  ? (f == app->chat_model.format ? app->chat_model : chat_spec_of(f))
                  : chat_spec_of(CHAT_RAW);
}

/* The special token spelled text (a template marker such as <|im_start|> or <|eot_id|>), or -1:
 * the tokenizer's own lookup, special tokens only (a marker never matches ordinary text). */
static int32_t special_id(void *user, const char *text, size_t len)
{
    const tokenizer *tok = user;
    char buf[128];
    if (len >= sizeof buf)
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    int32_t id = tokenizer_token_id(tok, buf);
    if (id >= 0 && tokenizer_is_special(tok, id))
        return id;
    static const char eot[] = "<|endoftext|>";   /* GPT-2's vocab.json path marks none special */
    return len == sizeof eot - 1 && memcmp(text, eot, len) == 0 ? tokenizer_eot_id(tok) : -1;
}

void cli_chat_config(const cli_app *app, session_chat *out)
{
    *out = (session_chat){.spec = app->chat, .model_spec = app->chat_model,
                          .special = special_id, .special_user = app->tok,
                          .bos_id = tokenizer_adds_bos(app->tok) ? tokenizer_bos_id(app->tok)
                                                                 : -1};
}

void cli_session_chat(const cli_app *app, session *s)
{
    session_chat c;
    cli_chat_config(app, &c);
    session_set_chat(s, &c, NULL);
}

tt_status cli_app_open(cli_app *app, const cli_options *o, bool tokenizer_only, char *notes,
                       size_t notes_cap, tt_error *errp)
{
    memset(app, 0, sizeof *app);
    if (notes_cap)
        notes[0] = 0;
    tt_error err = {0};
    const char *dir = cli_model_dir(o);
    if (!dir)
        return tt_fail(errp, TT_ERR_ARG, "no model: pass --model DIR (a Hugging Face GPT-2 "
                       "directory); the embedded default %s was not found beside the binary, in "
                       "its ../share/tokentop, in $XDG_DATA_HOME or $XDG_DATA_DIRS (tokentop/%s), "
                       "nor in the working directory", DEFAULT_MODEL_NAME, DEFAULT_MODEL_NAME);
    /* A name that is not a path: a model pulled by Ollama (its blob is a GGUF file). */
    struct stat sb;
    ollama_model om = {0};
    const char *path = dir;
    const size_t dn = strlen(dir);
    const bool missing = stat(dir, &sb) != 0;
    /* a missing FILE.gguf is a file's name, not the name of a model Ollama pulled */
    if (missing && dn > 5 && strcasecmp(dir + dn - 5, ".gguf") == 0)
        return tt_fail(errp, TT_ERR_ARG, "%s: no such file; --model also takes a model "
                       "directory or the NAME[:TAG] of a model Ollama pulled", dir);
    if (missing && ollama_is_name(dir)) {
        if (ollama_resolve_default(dir, &om, &err) != TT_OK)
            return tt_fail(errp, TT_ERR_IO, "%s", err.msg);
        path = om.model_path;
    }
    /* A GGUF file holds its tokenizer: the model is opened (mapped, cheap) to read it. */
    model *file_model = NULL;
    tt_status st;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        st = model_load(path, &file_model, &err);
        if (st == TT_OK && om.model_path)
            st = model_apply_ollama(file_model, om.name, om.params, om.template_text, &err);
        if (st == TT_OK)
            st = model_tokenizer_load(file_model, &app->tok, &err);
    } else if (!is_dir(path)) {   /* said before the loaders name a file inside it */
        ollama_model_free(&om);
        return tt_fail(errp, TT_ERR_ARG, "%s: no such directory; a model directory holds "
                       "config.json, model.safetensors (or its shards) and tokenizer.json (or "
                       "GPT-2's vocab.json and merges.txt), as Hugging Face saves them; --model "
                       "also takes a GGUF file or the NAME[:TAG] of a model Ollama pulled", dir);
    } else {
        st = tokenizer_load_dir(dir, &app->tok, &err);
    }
    if (st == TT_OK && !tokenizer_only) {
        if (file_model) {
            app->model = file_model;
            file_model = NULL;
        } else {
            st = model_load(dir, &app->model, &err);
        }
        if (st == TT_OK && app->model->gen_warning[0])
            cli_notes_add(notes, notes_cap, "%s (the file is ignored)", app->model->gen_warning);
        if (st == TT_OK && app->model->load_note[0] && o->dtype_set &&
            o->dtype != app->model->file_dtype)
            cli_notes_add(notes, notes_cap, "%s", app->model->load_note);
        if (st == TT_OK && tokenizer_vocab_size(app->tok) > app->model->config.V)
            st = tt_fail(&err, TT_ERR_CONFIG, "%s: the tokenizer has %d tokens but the model's "
                         "vocab_size is %d", dir, tokenizer_vocab_size(app->tok),
                         app->model->config.V);
        if (st == TT_OK) {
            load_chat(app, o, dir, notes, notes_cap);
            engine_options_from(app->model, o, false, &app->eopts);
            st = cli_create_engine(app->model, o, &app->eng, app->backend_note,
                                   sizeof app->backend_note, &err);
        }
    }
    model_free(file_model);   /* opened for its tokenizer only */
    ollama_model_free(&om);
    if (st != TT_OK) {
        tt_fail(errp, st, "%s", err.msg[0] ? err.msg : tt_status_str(st));
        cli_app_free(app);
    }
    return st;
}

tt_status cli_app_load(cli_app *app, const cli_options *o, bool tokenizer_only)
{
    char notes[4096];
    tt_error err = {0};
    tt_status st = cli_app_open(app, o, tokenizer_only, notes, sizeof notes, &err);
    for (const char *line = notes; *line;) {
        size_t len = strcspn(line, "\n");
        fprintf(stderr, "tokentop: %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
    if (st != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        return st;
    }
    /* Scripted calls stay quiet about an auto fall-back: -v says it, and the REPL shows it in its
     * status bar and /show. */
    if (!tokenizer_only && o->verbose) {
        if (app->backend_note[0])
            fprintf(stderr, "tokentop: %s\n", app->backend_note);
        fprintf(stderr, "tokentop: %s: %s%s%s\n", cli_model_dir(o), app->eng->description,
                gpu_plugin_path()[0] ? "; GPU plugin " : "", gpu_plugin_path());
    }
    return TT_OK;
}

engine *cli_device_fallback(void *user, struct session *s, engine *failed, const tt_error *why)
{
    (void)s;
    cli_app *app = user;
    engine_options eo = app->eopts;
    eo.n_ctx = failed->n_ctx;
    engine *cpu = NULL;
    tt_error err = {0};
    if (cpu_engine_create(app->model, &eo, &cpu, &err) != TT_OK) {
        snprintf(app->fallback_note, sizeof app->fallback_note,
                 "%.150s; the CPU engine could not be created either: %.100s",
                 why ? why->msg : "device error",
                 err.msg);
        if (!app->fallback_quiet)
            fprintf(stderr, "\ntokentop: %s\n", app->fallback_note);
        return NULL;
    }
    snprintf(app->fallback_note, sizeof app->fallback_note,
             "%.240s; continuing on the CPU (the context is prefilled again)",
             why ? why->msg : "device error");
    if (!app->fallback_quiet)
        fprintf(stderr, "\ntokentop: %s\n", app->fallback_note);
    if (app->eng == failed) {
        engine_free(failed);
        app->eng = cpu;
    }
    return cpu;
}

void cli_app_free(cli_app *app)
{
    engine_free(app->eng);
    model_free(app->model);
    tokenizer_free(app->tok);
    memset(app, 0, sizeof *app);
}
