/* check_commands.c: the slash-command table and every handler: valid values, each kind of invalid
 * value (old value kept, one-line message), prefix lookup and ambiguity, the flags the main loop
 * acts on, argument splitting, and the /save and /load format. Runs on a tiny random model. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "repl/session_file.h"
#include "tests/cmd_session.h"

static char *work_dir;

static void files_setup(void)
{
    model_dir = tu_tiny_model_dir(64);
    work_dir = tu_tmpdir();
}

static void files_teardown(void)
{
    tu_tmpdir_free(model_dir);
    tu_tmpdir_free(work_dir);
}

static const char *out(void)
{
    return E.out ? E.out : "";
}

#define ck_out_has(s) ck_assert_msg(strstr(out(), (s)) != NULL, "message \"%s\" lacks \"%s\"", \
                                    out(), (s))

static void generate_turn(const char *text)
{
    tt_error err = {0};
    ck_assert_int_eq(session_add_user_text(&S, text, strlen(text), &err), TT_OK);
    ck_assert_msg(session_generate(&S, NULL, NULL, &err) == TT_OK, "%s", err.msg);
}

/* ---------------------------------------------------------------------------------------------
 * Lookup */

START_TEST(exact_names_aliases_and_unique_prefixes_find_commands)
{
    char msg[256];
    ck_assert_str_eq(cmd_lookup("temp", msg, sizeof msg)->name, "temp");
    ck_assert_str_eq(cmd_lookup("te", msg, sizeof msg)->name, "temp");
    ck_assert_str_eq(cmd_lookup("reg", msg, sizeof msg)->name, "regen");
    ck_assert_str_eq(cmd_lookup("exit", msg, sizeof msg)->name, "quit");
    ck_assert_str_eq(cmd_lookup("clear", msg, sizeof msg)->name, "reset");
    ck_assert_str_eq(cmd_lookup("?", msg, sizeof msg)->name, "help");
    /* An exact name wins over being a prefix of another ("step" vs nothing longer, "stop"). */
    ck_assert_str_eq(cmd_lookup("stop", msg, sizeof msg)->name, "stop");
    ck_assert_str_eq(cmd_lookup("step", msg, sizeof msg)->name, "step");
}
END_TEST

START_TEST(ambiguous_prefix_lists_the_candidates)
{
    char msg[256];
    ck_assert_ptr_null(cmd_lookup("t", msg, sizeof msg));
    ck_assert_str_eq(msg, "ambiguous command: /t, could be: /temp, /topk, /topp");
    ck_assert_int_eq(run("/t 1"), CMD_ERROR);
    ck_assert_str_eq(out(), "ambiguous command: /t, could be: /temp, /topk, /topp");
    ck_assert_ptr_null(cmd_lookup("s", msg, sizeof msg));
    ck_assert(strstr(msg, "/sample") && strstr(msg, "/seed") && strstr(msg, "/stop"));
}
END_TEST

START_TEST(unknown_command_says_how_to_get_help)
{
    ck_assert_int_eq(run("/x"), CMD_ERROR);
    ck_assert_str_eq(out(), "Unknown command '/x'. Type /help.");
    ck_assert_int_eq(run("/"), CMD_ERROR);
    ck_assert_str_eq(out(), "Unknown command '/'. Type /help.");
    ck_assert_int_eq(run("/temperaturex 1"), CMD_ERROR);
    ck_assert_str_eq(out(), "Unknown command '/temperaturex'. Type /help.");
    /* a near miss is named */
    ck_assert_int_eq(run("/tmep 0.5"), CMD_ERROR);
    ck_assert_str_eq(out(), "Unknown command '/tmep'. Did you mean /temp? (/help lists them)");
    /* /sample takes no value: /sample 3 meant /samples 3 */
    ck_assert_int_eq(run("/sample 3"), CMD_ERROR);
    ck_out_has("/sample: too many arguments");
    ck_out_has("Did you mean /samples");
}
END_TEST

START_TEST(help_is_generated_from_the_table)
{
    ck_assert_int_eq(run("/help"), CMD_DONE);
    const cmd_entry *rows[128];
    int n = cmd_env_list(&E, rows, 128);
    ck_assert_int_gt(n, cmd_count);   /* the table and the registered modules */
    for (int i = 0; i < n; i++) {
        char name[40], line[48], heading[64], next[64];
        snprintf(name, sizeof name, "/%s", rows[i]->name);
        ck_out_has(name);
        ck_out_has(rows[i]->usage);
        /* Listed under its group's heading, before the next group's. */
        snprintf(line, sizeof line, "\n  /%s ", rows[i]->name);
        snprintf(heading, sizeof heading, "\n%s:\n", cmd_group_name(rows[i]->group));
        const char *l = strstr(out(), line), *h = strstr(out(), heading);
        ck_assert_msg(l && h && h < l, "/help lists %s outside its group (%s)", name, heading + 1);
        if (i + 1 < n && rows[i + 1]->group != rows[i]->group) {
            snprintf(next, sizeof next, "\n%s:\n", cmd_group_name(rows[i + 1]->group));
            const char *nh = strstr(out(), next);
            ck_assert_msg(nh && l < nh, "/help lists %s after the heading %s", name, next + 1);
        }
    }
    ck_assert_int_eq(run("/help beam"), CMD_DONE);   /* a module's command */
    ck_out_has("/beam [N|off|show [K|off]]: ");
    ck_assert_int_eq(run("/help"), CMD_DONE);
    ck_out_has("Ctrl-C");
    ck_out_has("red < 5%");
    ck_assert_int_eq(run("/help topp"), CMD_DONE);
    ck_out_has("/topp [X]: ");
    ck_assert_int_eq(run("/help /quit"), CMD_DONE);
    ck_out_has("(also /exit)");
    ck_assert_int_eq(run("/help t"), CMD_ERROR);
    ck_out_has("ambiguous");
}
END_TEST

/* The reference docs (docs/repl.md, doc/tokentop.1, /help) are generated from these rows, so a row
 * is its documentation: each needs a usage line and a group, and names must not collide. */
START_TEST(every_command_has_a_usage_line_and_a_group)
{
    const cmd_entry *rows[128];
    int n = cmd_env_list(&E, rows, 128);
    ck_assert_int_le(n, 128);
    for (int i = 0; i < n; i++) {
        const cmd_entry *c = rows[i];
        ck_assert_msg(c->name && *c->name, "row %d has no name", i);
        ck_assert_msg(c->usage && *c->usage, "/%s has no usage line", c->name);
        ck_assert_msg(c->args != NULL, "/%s has no argument synopsis (\"\" for none)", c->name);
        ck_assert_msg(c->group > CMD_GROUP_NONE && c->group < CMD_GROUP_COUNT,
                      "/%s has no group (cmd_entry.group): /help and the docs cannot list it",
                      c->name);
        ck_assert_msg(c->exec != NULL, "/%s has no handler", c->name);
        for (int j = 0; j < i; j++) {
            ck_assert_msg(strcmp(c->name, rows[j]->name) != 0, "/%s is in the table twice", c->name);
            ck_assert_msg(!c->alias || strcmp(c->alias, rows[j]->name) != 0,
                          "alias /%s of /%s is another command's name", c->alias, c->name);
        }
    }
}
END_TEST

START_TEST(wrong_argument_counts_print_the_usage)
{
    float t = S.set.sampler.temperature;
    ck_assert_int_eq(run("/temp 1 2"), CMD_ERROR);
    ck_assert_str_eq(out(), "/temp: too many arguments (usage: /temp [X])");
    ck_assert_float_eq(S.set.sampler.temperature, t);
    ck_assert_int_eq(run("/pick"), CMD_ERROR);
    ck_assert_str_eq(out(), "/pick: missing arguments (usage: /pick N)");
    ck_assert_int_eq(run("/save"), CMD_ERROR);
    ck_assert_int_eq(run("/greedy now"), CMD_ERROR);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Sampler settings */

typedef struct {
    const char *cmd, *good, *bad_kind[4];
} sampler_case;

/* Every sampler row: a valid value changes the setting (and says what it was); each kind of bad
 * value (not a number, out of range, trailing junk, not finite) is refused with the old value
 * kept and named. */
START_TEST(sampler_commands_validate_and_keep_the_old_value)
{
    const sampler_case cases[] = {
        {"temp", "0.7", {"abc", "-1", "0.7x", "nan"}},
        {"topk", "40", {"forty", "99999999999", "40.5", "1e99"}},
        {"topp", "0.9", {"high", "1.5", "0.9.1", "inf"}},
        {"minp", "0.05", {"low", "-0.1", "0.05%", "nan"}},
        {"presence", "0.5", {"some", "1e99", "0.5x", "-inf"}},
        {"frequency", "0.25", {"lots", "1e39", "1,5", "nan"}},
        {"repeat", "1.2", {"x", "0", "1.2.3", "inf"}},
        {"window", "32", {"w", "-2", "3.5", "1e99"}},
        {"order", "llama", {"gpt", "HFF", "", "1"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const sampler_case *c = &cases[i];
        char line[128];
        snprintf(line, sizeof line, "/%s %s", c->cmd, c->good);
        int f = run(line);
        ck_assert_msg(f == (CMD_STATUS | CMD_PEEK), "%s: flags %d, %s", line, f, out());
        ck_assert_msg(strncmp(out(), c->cmd, strlen(c->cmd)) == 0, "%s: %s", line, out());
        ck_assert_msg(strstr(out(), c->good) != NULL, "%s: %s", line, out());
        sampler_params before = S.set.sampler;
        for (int k = 0; k < 4; k++) {
            if (!c->bad_kind[k][0])
                snprintf(line, sizeof line, "/%s \"\"", c->cmd);
            else
                snprintf(line, sizeof line, "/%s %s", c->cmd, c->bad_kind[k]);
            ck_assert_msg(run(line) == CMD_ERROR, "%s accepted: %s", line, out());
            ck_assert_msg(tu_same_sampler_params(&before, &S.set.sampler), "%s changed it", line);
            ck_assert_msg(strstr(out(), "(kept ") != NULL, "%s: %s", line, out());
            ck_assert_msg(strchr(out(), '\n') == NULL, "%s: not one line: %s", line, out());
        }
    }
    ck_assert_float_eq_tol(S.set.sampler.temperature, 0.7f, 1e-6);
    ck_assert_int_eq(S.set.sampler.top_k, 40);
    ck_assert_float_eq_tol(S.set.sampler.top_p, 0.9f, 1e-6);
    ck_assert_float_eq_tol(S.set.sampler.min_p, 0.05f, 1e-6);
    ck_assert_float_eq_tol(S.set.sampler.presence_penalty, 0.5f, 1e-6);
    ck_assert_float_eq_tol(S.set.sampler.frequency_penalty, 0.25f, 1e-6);
    ck_assert_float_eq_tol(S.set.sampler.repetition_penalty, 1.2f, 1e-6);
    ck_assert_int_eq(S.set.sampler.penalty_window, 32);
    ck_assert_int_eq(S.set.sampler.order, SAMPLER_ORDER_LLAMA);
}
END_TEST

START_TEST(sampler_command_messages_name_the_change)
{
    ck_assert_int_eq(run("/temp 0.5"), CMD_STATUS | CMD_PEEK);
    ck_assert_str_eq(out(), "temp 0.5 (was 1)");
    ck_assert_int_eq(run("/temp"), CMD_DONE);
    ck_assert_str_eq(out(), "temp 0.5");
    ck_assert_int_eq(run("/temp 0"), CMD_STATUS | CMD_PEEK);
    ck_assert_str_eq(out(), "temp 0 (0: greedy, always the most likely token) (was 0.5)");
    ck_assert_int_eq(run("/topp 1.5"), CMD_ERROR);
    ck_assert_str_eq(out(), "/topp: 1.5 is outside [0, 1] (kept 1)");   /* the name once */
    ck_assert_int_eq(run("/temp -1"), CMD_ERROR);
    ck_assert_msg(strncmp(out(), "/temp: -1 ", 10) == 0, "%s", out());
    ck_assert_int_eq(run("/topk 0"), CMD_STATUS | CMD_PEEK);
    ck_assert_str_eq(out(), "topk 0 (off)");
    ck_assert_int_eq(run("/order llama"), CMD_STATUS | CMD_PEEK);
    ck_out_has("then temperature");
}
END_TEST

/* /defaults and /temp default (any sampler command) bring back the settings the session started
 * with (the model's generation defaults and the command line). */
START_TEST(defaults_restore_the_starting_settings)
{
    sampler_params start = S.set.sampler;
    int start_max = S.set.max_new_tokens;
    run("/temp 0.3");
    run("/topk 7");
    run("/max 99");
    ck_assert_int_eq(run("/temp default"), CMD_STATUS | CMD_PEEK);
    ck_assert_float_eq(S.set.sampler.temperature, start.temperature);
    ck_assert_int_eq(S.set.sampler.top_k, 7);
    ck_assert_int_eq(run("/defaults"), CMD_STATUS | CMD_PEEK);
    ck_out_has("the settings tokentop started with");
    ck_out_has("(was ");
    ck_assert(tu_same_sampler_params(&start, &S.set.sampler));
    ck_assert_int_eq(S.set.max_new_tokens, start_max);
}
END_TEST

START_TEST(greedy_and_sample_switch_the_mode)
{
    ck_assert_int_eq(run("/greedy"), CMD_STATUS | CMD_PEEK);
    ck_assert(S.set.sampler.greedy);
    ck_assert_int_eq(run("/sample"), CMD_STATUS | CMD_PEEK);
    ck_assert(!S.set.sampler.greedy);
    ck_out_has("sampling at temp 1");
    run("/temp 0");
    ck_assert_int_eq(run("/sample"), CMD_STATUS | CMD_PEEK);
    ck_out_has("temp is 0, which is greedy");
}
END_TEST

START_TEST(seed_restarts_the_random_stream)
{
    ck_assert_int_eq(run("/seed 7"), CMD_STATUS);
    ck_assert_uint_eq(S.set.seed, 7);
    rng r;
    rng_seed(&r, 7);
    ck_assert_uint_eq(rng_next(&S.rng), rng_next(&r));
    ck_assert_int_eq(run("/seed 18446744073709551615"), CMD_STATUS);
    ck_assert_uint_eq(S.set.seed, UINT64_MAX);
    const char *bad[] = {"-1", "x", "1.5", "18446744073709551616", "+3"};
    for (size_t i = 0; i < 5; i++) {
        char line[64];
        snprintf(line, sizeof line, "/seed %s", bad[i]);
        ck_assert_msg(run(line) == CMD_ERROR, "%s", line);
        ck_assert_uint_eq(S.set.seed, UINT64_MAX);
        ck_out_has("kept 18446744073709551615");
    }
    ck_assert_int_eq(run("/seed"), CMD_DONE);
    ck_assert_str_eq(out(), "seed 18446744073709551615");
}
END_TEST

START_TEST(max_accepts_positive_token_counts)
{
    ck_assert_int_eq(run("/max 64"), CMD_STATUS);
    ck_assert_int_eq(S.set.max_new_tokens, 64);
    ck_assert_str_eq(out(), "max 64 new tokens per turn (was 8)");
    const char *bad[] = {"0", "-5", "many", "16777217", "2.5"};
    for (size_t i = 0; i < 5; i++) {
        char line[64];
        snprintf(line, sizeof line, "/max %s", bad[i]);
        ck_assert_msg(run(line) == CMD_ERROR, "%s", line);
        ck_assert_int_eq(S.set.max_new_tokens, 64);
        ck_out_has("(kept 64)");
    }
}
END_TEST

START_TEST(stop_adds_lists_and_clears_stop_strings)
{
    ck_assert_int_eq(run("/stop"), CMD_DONE);
    ck_assert_str_eq(out(), "no stop strings");
    ck_assert_int_eq(run("/stop \\n\\n"), CMD_STATUS);
    ck_assert_int_eq(S.set.n_stops, 1);
    ck_assert_str_eq(S.set.stops[0], "\n\n");
    ck_assert_str_eq(out(), "stop string added: \"\\n\\n\" (1 in all)");
    ck_assert_int_eq(run("/stop add \"The End\""), CMD_STATUS);
    ck_assert_str_eq(S.set.stops[1], "The End");
    ck_assert_int_eq(run("/stop add clear"), CMD_STATUS);   /* the literal word */
    ck_assert_str_eq(S.set.stops[2], "clear");
    ck_assert_int_eq(run("/stop"), CMD_DONE);
    ck_assert_str_eq(out(), "stop strings: \"\\n\\n\" \"The End\" \"clear\"");
    ck_assert_int_eq(run("/stop \"\""), CMD_ERROR);
    ck_out_has("must not be empty");
    ck_assert_int_eq(run("/stop a b"), CMD_ERROR);
    ck_assert_int_eq(run("/stop \"unterminated"), CMD_ERROR);
    ck_out_has("unterminated quote");
    for (int i = 3; i < SESSION_MAX_STOPS; i++)
        ck_assert_int_eq(run("/stop x"), CMD_STATUS);
    ck_assert_int_eq(run("/stop y"), CMD_ERROR);
    ck_out_has("at most 8");
    ck_assert_int_eq(run("/stop clear"), CMD_STATUS);
    ck_assert_int_eq(S.set.n_stops, 0);
}
END_TEST

START_TEST(bars_sets_the_histogram_height)
{
    ck_assert_int_eq(E.bars, 10);
    ck_assert_int_eq(run("/bars 20"), CMD_LAYOUT);
    ck_assert_int_eq(E.bars, 20);
    ck_assert_int_eq(run("/bars 0"), CMD_ERROR);
    ck_assert_int_eq(run("/bars 33"), CMD_ERROR);
    ck_assert_int_eq(run("/bars ten"), CMD_ERROR);
    ck_assert_int_eq(E.bars, 20);
}
END_TEST

START_TEST(show_reports_settings_model_and_cache)
{
    generate_turn("Hello");
    ck_assert_int_eq(run("/show"), CMD_DONE);
    ck_out_has("model ");
    ck_out_has("gpt2, 0.1M parameters, V 512, 64 positions");
    ck_out_has("KiB a position");
    ck_out_has("sampler     temp 1 top-k 0");
    ck_out_has("seed 42");
    char kv[64];
    snprintf(kv, sizeof kv, "KV cache %d/64", eng->n_past);
    ck_out_has(kv);
    ck_out_has("generated 8");
    ck_out_has("speculative off: no draft model");
    char conv[64];
    snprintf(conv, sizeof conv, "conversation %d tokens in 1 turn;", S.n_tokens);
    ck_out_has(conv);   /* not "1 turns" */
}
END_TEST

/* The /draft hook of the test: the target's own model as the draft (what --draft does, minus the
 * tokenizer check, which tests/check_speculative.c and the e2e script cover). */
static engine *draft_eng;
static tt_status test_load_draft(void *user, const char *dir, tt_error *err)
{
    if (strcmp(dir, "missing") == 0)
        return tt_fail(err, TT_ERR_IO, "%s: no such directory", dir);
    engine_options eo;
    engine_options_default(&eo);
    eo.n_threads = 1;
    engine_free(draft_eng);
    draft_eng = NULL;
    session_set_draft(&S, NULL, NULL);
    tt_status st = cpu_engine_create(mdl, &eo, &draft_eng, err);
    if (st == TT_OK)
        st = session_set_draft(&S, draft_eng, err);
    static char name[64];
    snprintf(name, sizeof name, "%s", dir);   /* the argument does not outlive the command */
    E.draft_dir = name;
    return st;
}

/* /model without a front end that can open models (cmd_host.load_model): shown, not opened.
 * Opening is check_repl_host's. */
START_TEST(model_shows_the_model_and_needs_a_host_to_open_another)
{
    ck_assert_int_eq(run("/model"), CMD_DONE);
    ck_out_has(S.model->name);
    ck_out_has("/model NAME[:TAG]|PATH opens another");
    int n = S.n_tokens;
    ck_assert_int_eq(run("/model other"), CMD_ERROR);
    ck_out_has("/model: opening another model is not available here (start with --model other)");
    ck_assert_ptr_eq(S.model, mdl);
    ck_assert_int_eq(S.n_tokens, n);
    ck_assert_int_eq(run("/model a b"), CMD_ERROR);
    ck_out_has("too many arguments");
}
END_TEST

START_TEST(speculative_commands_drive_the_session)
{
    ck_assert_int_eq(run("/spec on"), CMD_ERROR);
    ck_out_has("needs a draft model");
    ck_assert_int_eq(run("/draft /tmp"), CMD_ERROR);
    ck_out_has("not available here");
    ck_assert_int_eq(run("/gamma 6"), CMD_STATUS);        /* kept for when a draft comes */
    ck_assert_int_eq(S.gamma, 6);
    static const cmd_host host = {.load_draft = test_load_draft};
    E.host = &host;
    ck_assert_int_eq(run("/draft missing"), CMD_ERROR);
    ck_out_has("/draft: missing: no such directory");
    ck_assert_ptr_null(S.draft);
    ck_assert_int_eq(run("/draft here"), CMD_STATUS);
    ck_assert_ptr_nonnull(S.draft);
    ck_assert(S.spec_on);
    ck_out_has("draft model here loaded; speculative decoding on (gamma 6)");
    ck_assert_int_eq(run("/spec off"), CMD_STATUS);
    ck_assert(!S.spec_on);
    ck_assert_int_eq(run("/spec maybe"), CMD_ERROR);
    ck_assert_int_eq(run("/spec on"), CMD_STATUS);
    ck_assert(S.spec_on);
    ck_assert_int_eq(run("/gamma 65"), CMD_ERROR);
    ck_out_has("kept 6");
    ck_assert_int_eq(run("/gamma auto"), CMD_STATUS);
    ck_assert(S.gamma_adaptive && S.gamma == 6);
    ck_assert_int_eq(run("/gamma 3"), CMD_STATUS);
    ck_assert(!S.gamma_adaptive && S.gamma == 3);
    ck_assert_int_eq(run("/show"), CMD_DONE);
    ck_out_has("speculative on, gamma 3 fixed");
    ck_out_has("draft here");
    generate_turn("Hello");                                /* a speculative turn runs */
    ck_assert(S.last.speculative);
    ck_assert_int_gt(S.last.drafted, 0);
    session_set_draft(&S, NULL, NULL);
    engine_free(draft_eng);
    draft_eng = NULL;
}
END_TEST

START_TEST(pace_sets_the_rate_and_refuses_bad_values)
{
    ck_assert_double_eq(E.pace.rate, 0);
    ck_assert_int_eq(run("/pace 12.5"), CMD_STATUS);
    ck_assert_double_eq(E.pace.rate, 12.5);
    ck_out_has("pace 12.5 tokens/s: each token (and each rejected draft) is held on screen 80 ms");
    const char *bad[] = {"/pace -1", "/pace abc", "/pace 1e9", "/pace nan", "/pace inf",
                         "/pace 5x", "/pace \"\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(run(bad[i]), CMD_ERROR);
        ck_out_has("is not a number of tokens per second in [0, 1000]");
        ck_out_has("(kept 12.5)");
        ck_assert_double_eq(E.pace.rate, 12.5);
    }
    ck_assert_int_eq(run("/pace"), CMD_DONE);
    ck_out_has("pace        12.5 tokens/s shown");
    ck_assert_int_eq(run("/show"), CMD_DONE);
    ck_out_has("pace        12.5 tokens/s shown");
    ck_assert_int_eq(run("/pace 0"), CMD_STATUS);
    ck_assert_double_eq(E.pace.rate, 0);
    ck_out_has("pace off");
}
END_TEST

START_TEST(quit_asks_the_loop_to_leave)
{
    ck_assert_int_eq(run("/quit"), CMD_QUIT);
    ck_assert_int_eq(run("/exit"), CMD_QUIT);
    ck_assert_int_eq(run("/q"), CMD_QUIT);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The conversation */

START_TEST(reset_clears_conversation_and_cache)
{
    generate_turn("Hello");
    ck_assert_int_gt(eng->n_past, 0);
    ck_assert_int_eq(run("/reset"), CMD_CONV | CMD_CLEAR | CMD_STATUS);
    ck_assert_int_eq(S.n_tokens, 0);
    ck_assert_int_eq(eng->n_past, 0);
    ck_assert_int_eq(run("/clear"), CMD_CONV | CMD_CLEAR | CMD_STATUS);
}
END_TEST

START_TEST(undo_drops_the_last_turn_or_n_tokens_and_truncates_the_cache)
{
    generate_turn("Hello");
    int after_first = S.n_tokens;
    generate_turn(" there");
    ck_assert_int_gt(S.n_tokens, after_first);
    ck_assert_int_eq(run("/undo"), CMD_CONV | CMD_STATUS);
    ck_assert_int_eq(S.n_tokens, after_first);
    ck_assert_int_le(eng->n_past, after_first);
    ck_assert_int_eq(session_cached_prefix(&S), eng->n_past);
    ck_out_has("(the last turn)");
    ck_assert_int_eq(run("/undo 3"), CMD_CONV | CMD_STATUS);
    ck_assert_int_eq(S.n_tokens, after_first - 3);
    ck_assert_int_le(eng->n_past, after_first - 3);
    ck_out_has("dropped 3 tokens (as asked)");
}
END_TEST

START_TEST(undo_refuses_bad_counts)
{
    ck_assert_int_eq(run("/undo"), CMD_ERROR);
    ck_out_has("empty");
    generate_turn("Hi");
    int n = S.n_tokens;
    char line[64];
    snprintf(line, sizeof line, "/undo %d", n + 1);
    ck_assert_int_eq(run(line), CMD_ERROR);
    ck_out_has("is more than the");
    ck_assert_int_eq(run("/undo 0"), CMD_ERROR);
    ck_assert_int_eq(run("/undo -2"), CMD_ERROR);
    ck_assert_int_eq(run("/undo two"), CMD_ERROR);
    ck_assert_int_eq(S.n_tokens, n);
}
END_TEST

START_TEST(regen_drops_the_reply_and_asks_for_a_generation)
{
    ck_assert_int_eq(run("/regen"), CMD_ERROR);
    generate_turn("Hello");
    tt_error err = {0};
    ck_assert_int_eq(session_add_user_text(&S, " you", 4, &err), TT_OK);
    ck_assert_int_eq(run("/regen"), CMD_ERROR);   /* the new turn has no reply yet */
    ck_out_has("no reply yet");
    ck_assert_msg(session_generate(&S, NULL, NULL, &err) == TT_OK, "%s", err.msg);
    int with_reply = S.n_tokens;
    ck_assert_int_eq(run("/regen"), CMD_CONV | CMD_STATUS | CMD_GENERATE);
    ck_assert_int_eq(S.n_tokens, with_reply - 8);
    ck_assert_int_eq(S.info[S.n_tokens - 1].origin, TOKEN_USER);
}
END_TEST

/* Found by the soak (tests/soak/soak.sh): a reply long enough to shift the context had moved the
 * window past everything /regen keeps, and the window was left there, so the regeneration failed
 * with "nothing to run the model on". */
START_TEST(regen_after_context_shifts_has_the_prompt_to_run_on)
{
    tt_error err = {0};
    ck_assert_int_eq(run("/max 150") & CMD_ERROR, 0);   /* the context holds 64 */
    ck_assert_int_eq(session_add_user_text(&S, "Hi", 2, &err), TT_OK);
    int prompt = S.n_tokens;
    ck_assert_msg(session_generate(&S, NULL, NULL, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_gt(S.last.context_shifts, 0);
    ck_assert_int_eq(run("/regen"), CMD_CONV | CMD_STATUS | CMD_GENERATE);
    ck_assert_int_eq(S.n_tokens, prompt);
    ck_assert_msg(session_generate(&S, NULL, NULL, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_gt(S.n_tokens, prompt);
}
END_TEST

START_TEST(editing_commands_are_refused_while_generating)
{
    generate_turn("Hello");
    E.busy = true;
    int n = S.n_tokens;
    const char *refused[] = {"/undo", "/regen", "/reset", "/load x", "/step on", "/pick 1"};
    for (size_t i = 0; i < 6; i++) {
        ck_assert_msg(run(refused[i]) == CMD_ERROR, "%s", refused[i]);
        ck_out_has("not while generating");
    }
    ck_assert_int_eq(S.n_tokens, n);
    ck_assert_int_eq(run("/temp 0.3"), CMD_STATUS | CMD_PEEK);   /* settings apply at once */
    ck_assert_int_eq(run("/show"), CMD_DONE);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Step mode */

START_TEST(step_mode_needs_the_terminal)
{
    E.line_mode = true;
    ck_assert_int_eq(run("/step"), CMD_ERROR);
    ck_assert_int_eq(run("/pick 1"), CMD_ERROR);
    E.line_mode = false;
    ck_assert_int_eq(run("/pick 1"), CMD_ERROR);
    ck_out_has("/step on first");
    /* no value shows the state, as /spec, /temp and the rest do; it does not toggle */
    ck_assert_int_eq(run("/step"), CMD_DONE);
    ck_out_has("step mode off (/step on turns it on)");
    ck_assert(!E.step_mode);
    ck_assert_int_eq(run("/step on"), CMD_STATUS | CMD_PEEK);
    ck_assert(E.step_mode);
    ck_assert_int_eq(run("/step"), CMD_DONE);
    ck_out_has("step mode on");
    ck_assert(E.step_mode);
    ck_assert_int_eq(run("/step on"), CMD_STATUS | CMD_PEEK);
    ck_assert(E.step_mode);
    ck_assert_int_eq(run("/step maybe"), CMD_ERROR);
    ck_assert_int_eq(run("/step off"), CMD_STATUS | CMD_PEEK);
    ck_assert(!E.step_mode);
}
END_TEST

START_TEST(pick_replaces_the_token_just_stepped)
{
    tt_error err = {0};
    run("/step on");
    ck_assert_int_eq(run("/pick 1"), CMD_ERROR);   /* no histogram yet */
    ck_out_has("no histogram");
    ck_assert_int_eq(session_add_user_text(&S, "Hello", 5, &err), TT_OK);
    ck_assert_int_eq(session_gen_begin(&S, &err), TT_OK);
    session_stop stop;
    ck_assert_int_eq(session_gen_step(&S, -1, NULL, NULL, &stop, &err), TT_OK);
    ck_assert_int_eq(session_peek(&S, &E.hist.snap, &err), TT_OK);   /* stand-in for the step's */
    E.hist.snap.token = S.tokens[S.n_tokens - 1];
    E.hist.kind = UI_HIST_STEP;
    E.hist.pos = S.n_tokens - 1;
    int n = S.n_tokens;
    ck_assert_int_eq(run("/pick 99"), CMD_ERROR);
    ck_out_has("not a row of the histogram (1 to 32)");
    ck_assert_int_eq(run("/pick 3"), CMD_STEP | CMD_STATUS | CMD_CONV);
    ck_assert_int_eq(E.pick_id, E.hist.snap.top[2].id);
    ck_assert_int_eq(S.n_tokens, n - 1);   /* the stepped token is gone; the loop forces #3 */
    ck_assert_ptr_null(S.gen);
    ck_out_has("picked #3 ");
    ck_out_has(" instead of ");
    /* The histogram no longer describes the last token: a second pick is refused. */
    ck_assert_int_eq(run("/pick 2"), CMD_ERROR);
    ck_out_has("no longer matches");
}
END_TEST

START_TEST(pick_from_a_peek_chooses_the_next_token)
{
    tt_error err = {0};
    run("/step on");
    ck_assert_int_eq(session_add_user_text(&S, "Hello", 5, &err), TT_OK);
    ck_assert_int_eq(session_peek(&S, &E.hist.snap, &err), TT_OK);
    E.hist.kind = UI_HIST_PEEK;
    E.hist.pos = S.n_tokens;
    int n = S.n_tokens;
    ck_assert_int_eq(run("/pick 2"), CMD_STEP | CMD_STATUS);
    ck_assert_int_eq(E.pick_id, E.hist.snap.top[1].id);
    ck_assert_int_eq(S.n_tokens, n);
    ck_out_has("picked #2 ");
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Arguments and prompts */

START_TEST(arguments_split_with_quotes_and_escapes)
{
    char **argv = NULL;
    char msg[128];
    int argc = cmd_split_args("  a \"b c\" d\\ e \\x41\\t \"q\\\"x\"", &argv, msg, sizeof msg);
    ck_assert_int_eq(argc, 5);
    ck_assert_str_eq(argv[0], "a");
    ck_assert_str_eq(argv[1], "b c");
    ck_assert_str_eq(argv[2], "d e");
    ck_assert_str_eq(argv[3], "A\t");
    ck_assert_str_eq(argv[4], "q\"x");
    cmd_free_args(argv, argc);
    argc = cmd_split_args("\"q\\\"x\" \"\"", &argv, msg, sizeof msg);
    ck_assert_int_eq(argc, 2);
    ck_assert_str_eq(argv[0], "q\"x");
    ck_assert_str_eq(argv[1], "");
    cmd_free_args(argv, argc);
    ck_assert_int_eq(cmd_split_args("\"open", &argv, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "unterminated quote");
    ck_assert_int_eq(cmd_split_args("\\q", &argv, msg, sizeof msg), -1);
    ck_assert(strstr(msg, "unknown escape \\q") != NULL);
    ck_assert_int_eq(cmd_split_args("\\x4", &argv, msg, sizeof msg), -1);
    ck_assert_int_eq(cmd_split_args("end\\", &argv, msg, sizeof msg), -1);
    ck_assert_int_eq(cmd_split_args("", &argv, msg, sizeof msg), 0);
    cmd_free_args(argv, 0);
}
END_TEST

START_TEST(commands_and_text_are_told_apart)
{
    ck_assert(cmd_is_command("/temp 1"));
    ck_assert(!cmd_is_command("//temp is text"));
    ck_assert(!cmd_is_command(" /temp"));
    ck_assert(!cmd_is_command("hello"));
    ck_assert(!cmd_is_command(""));
}
END_TEST

START_TEST(prompts_start_a_new_line_unless_they_continue_the_text)
{
    size_t len;
    char *t = cmd_prompt_text(&S, "Hello", &len);   /* empty conversation: as typed */
    ck_assert_str_eq(t, "Hello");
    free(t);
    tt_error err = {0};
    ck_assert_int_eq(session_add_user_text(&S, "abc", 3, &err), TT_OK);
    t = cmd_prompt_text(&S, "Next", &len);
    ck_assert_str_eq(t, "\nNext");
    ck_assert_uint_eq(len, 5);
    free(t);
    t = cmd_prompt_text(&S, " and more", &len);
    ck_assert_str_eq(t, " and more");
    free(t);
    t = cmd_prompt_text(&S, "//slash", &len);
    ck_assert_str_eq(t, "\n/slash");
    free(t);
    t = cmd_prompt_text(&S, "", &len);   /* Enter alone: continue */
    ck_assert_str_eq(t, "");
    free(t);
    ck_assert_int_eq(session_add_user_text(&S, "x\n", 2, &err), TT_OK);
    t = cmd_prompt_text(&S, "Line", &len);
    ck_assert_str_eq(t, "Line");
    free(t);
}
END_TEST

START_TEST(chat_switches_the_format_and_refuses_unknown_names)
{
    session_chat c = {.spec = chat_spec_of(CHAT_CHATML), .model_spec = chat_spec_of(CHAT_CHATML),
                      .bos_id = -1};
    ck_assert_int_eq(session_set_chat(&S, &c, NULL), TT_OK);
    ck_assert_int_eq(run("/chat"), CMD_DONE);
    ck_assert_msg(strstr(E.out, "chat chatml; the model's format: chatml"), "%s", E.out);
    ck_assert_int_eq(run("/chat off"), CMD_STATUS);
    ck_assert_int_eq(session_chat_format(&S), CHAT_RAW);
    ck_assert_int_eq(run("/chat zephyr"), CMD_STATUS);
    ck_assert_int_eq(session_chat_format(&S), CHAT_ZEPHYR);
    ck_assert_msg(strstr(E.out, "replies end at </s>"), "%s", E.out);
    ck_assert_int_eq(run("/chat Zephyr"), CMD_ERROR);   /* refused: the format stays */
    ck_assert_msg(strstr(E.out, "\"Zephyr\" is not a chat format (chatml, llama3"), "%s", E.out);
    ck_assert_int_eq(session_chat_format(&S), CHAT_ZEPHYR);
    ck_assert_int_eq(run("/chat on"), CMD_STATUS);
    ck_assert_int_eq(session_chat_format(&S), CHAT_CHATML);
    /* a model without a template has nothing to turn on */
    c.model_spec = chat_spec_of(CHAT_RAW);
    ck_assert_int_eq(session_set_chat(&S, &c, NULL), TT_OK);
    ck_assert_int_eq(run("/chat on"), CMD_ERROR);
    ck_assert_msg(strstr(E.out, "the model has no chat template"), "%s", E.out);
    /* in chat mode a typed prompt is the turn as typed: the format separates the turns */
    tt_error err = {0};
    ck_assert_int_eq(session_add_user_text(&S, "abc", 3, &err), TT_OK);
    size_t len;
    char *t = cmd_prompt_text(&S, "Next", &len);
    ck_assert_str_eq(t, "Next");
    free(t);
}
END_TEST

START_TEST(system_sets_shows_and_clears_the_system_message)
{
    ck_assert_int_eq(run("/system"), CMD_DONE);
    ck_assert_msg(strstr(E.out, "system: none"), "%s", E.out);
    ck_assert_int_eq(run("/system You are  terse."), CMD_STATUS);
    ck_assert_str_eq(S.system, "You are terse.");
    ck_assert_msg(strstr(E.out, "used in chat mode only"), "%s", E.out);   /* chat is off */
    ck_assert_int_eq(run("/system"), CMD_DONE);
    ck_assert_msg(strstr(E.out, "system: You are terse."), "%s", E.out);
    ck_assert_int_eq(run("/system off"), CMD_STATUS);
    ck_assert_ptr_null(S.system);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * /save and /load */

START_TEST(save_then_load_restores_tokens_and_settings_with_prefix_reuse)
{
    const char *path = tu_path("%s/conv.json", work_dir);
    run("/temp 0.7");
    run("/topk 33");
    run("/order llama");
    run("/stop \\n\\n");
    run("/max 5");
    generate_turn("Hello");
    generate_turn(" again");
    int n = S.n_tokens, turns = S.n_turns;
    int32_t ids[256];
    token_info info[256];
    memcpy(ids, S.tokens, (size_t)n * sizeof *ids);
    memcpy(info, S.info, (size_t)n * sizeof *info);
    char line[512];
    snprintf(line, sizeof line, "/save %s", path);
    ck_assert_int_eq(run(line), CMD_DONE);
    ck_out_has("saved ");
    size_t flen;
    char *file = tu_read_file(path, &flen);
    ck_assert_ptr_nonnull(file);
    ck_assert(strstr(file, "\"format\": \"tokentop-session\""));
    ck_assert(strstr(file, "\"version\": 1"));
    ck_assert(strstr(file, "\"top_k\": 33"));
    ck_assert(strstr(file, "\"temperature\": 0.7,"));   /* shortest form, not 0.699999988 */
    ck_assert(strstr(file, "\"order\": \"llama\""));
    ck_assert(strstr(file, "\"stop\": [\"\\n\\n\"]"));
    ck_assert(strstr(file, "\"origin\": \"sampled\""));
    free(file);
    /* Change everything, keep the first turn in the cache, then load. */
    run("/temp 1");
    run("/topk 0");
    run("/order hf");
    run("/stop clear");
    run("/max 9");
    run("/seed 99");
    run("/undo");
    int cached = session_cached_prefix(&S);
    ck_assert_int_gt(cached, 0);
    snprintf(line, sizeof line, "/load! %s", path);
    ck_assert_int_eq(run(line), CMD_CONV | CMD_STATUS | CMD_CLEAR);
    ck_assert_int_eq(S.n_tokens, n);
    ck_assert_int_eq(S.n_turns, turns);
    ck_assert(memcmp(S.tokens, ids, (size_t)n * sizeof *ids) == 0);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(S.info[i].origin, info[i].origin);
        ck_assert_int_eq(S.info[i].turn, info[i].turn);
        ck_assert_float_eq_tol(S.info[i].p, info[i].p, 1e-5);
    }
    ck_assert_float_eq(S.set.sampler.temperature, 0.7f);   /* exactly the float saved */
    ck_assert_int_eq(S.set.sampler.top_k, 33);
    ck_assert_int_eq(S.set.sampler.order, SAMPLER_ORDER_LLAMA);
    ck_assert_int_eq(S.set.n_stops, 1);
    ck_assert_str_eq(S.set.stops[0], "\n\n");
    ck_assert_int_eq(S.set.max_new_tokens, 5);
    ck_assert_uint_eq(S.set.seed, 42);
    /* The shared prefix is still in the cache: the next generation reuses it. */
    ck_assert_int_eq(session_cached_prefix(&S), cached);
    tt_error err = {0};
    ck_assert_int_eq(session_generate(&S, NULL, NULL, &err), TT_OK);
    ck_assert_int_eq(S.last.reused_tokens, cached);
    ck_assert_int_eq(S.last.prefilled_tokens, n - cached);
}
END_TEST

START_TEST(load_refuses_bad_files_and_changes_nothing)
{
    generate_turn("Hello");
    int n = S.n_tokens;
    sampler_params before = S.set.sampler;
    const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"format\": \"other\", \"version\": 1, \"tokens\": []}", "format: expected"},
        {"{\"format\": \"tokentop-session\", \"version\": 2, \"tokens\": []}", "version"},
        {"{\"format\": \"tokentop-session\", \"version\": 1, \"vocab_size\": 50257, "
         "\"tokens\": []}", "vocab_size: 50257 does not match the model's 512"},
        {"{\"format\": \"tokentop-session\", \"version\": 1, \"settings\": {\"top_p\": 1.5}, "
         "\"tokens\": []}", "settings.top_p: top_p: 1.5 is outside [0, 1]"},
        {"{\"format\": \"tokentop-session\", \"version\": 1, \"settings\": {\"temperature\": "
         "\"hot\"}, \"tokens\": []}", "settings.temperature: expected a number"},
        {"{\"format\": \"tokentop-session\", \"version\": 1, \"tokens\": [{\"id\": 512}]}",
         "tokens[0].id: expected an integer in [0, 512)"},
        {"{\"format\": \"tokentop-session\", \"version\": 1, \"tokens\": [{\"id\": 5, "
         "\"origin\": \"alien\"}]}", "tokens[0].origin"},
        {"{\"format\": \"tokentop-session\", \"version\": 1, \"tokens\": [{\"id\": 5, "
         "\"turn\": 2}, {\"id\": 6, \"turn\": 1}]}", "tokens[1].turn"},
        {"{\"format\": \"tokentop-session\", \"version\": 1}", "neither tokens nor text"},
        {"{\"format\": ", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *path = tu_path("%s/bad%zu.json", work_dir, i);
        ck_assert_int_eq(tu_write_file(path, bad[i].json, strlen(bad[i].json)), 0);
        char line[512];
        snprintf(line, sizeof line, "/load! %s", path);
        ck_assert_msg(run(line) == CMD_ERROR, "%s loaded", bad[i].json);
        ck_assert_msg(strstr(out(), bad[i].msg) != NULL, "%s: %s", bad[i].json, out());
        ck_assert_msg(strstr(out(), path) != NULL, "%s: no file name", out());
        ck_assert_int_eq(S.n_tokens, n);
        ck_assert(tu_same_sampler_params(&before, &S.set.sampler));
    }
    ck_assert_int_eq(run("/load /nonexistent/file.json"), CMD_ERROR);
    ck_out_has("/nonexistent/file.json");
}
END_TEST

START_TEST(load_of_a_text_file_makes_it_the_prompt)
{
    const char *path = tu_path("%s/prompt.txt", work_dir);
    ck_assert_int_eq(tu_write_file(path, "In the beginning", 16), 0);
    char line[512];
    snprintf(line, sizeof line, "/load %s", path);
    ck_assert_int_eq(run(line), CMD_CONV | CMD_STATUS | CMD_CLEAR);
    char *text = session_text(&S, 0, S.n_tokens);
    ck_assert_str_eq(text, "In the beginning");
    free(text);
    ck_assert_int_eq(S.n_turns, 1);
    for (int i = 0; i < S.n_tokens; i++)
        ck_assert_int_eq(S.info[i].origin, TOKEN_USER);
}
END_TEST

/* A binary file is refused by name (it used to become a prompt of thousands of byte tokens);
 * a CRLF text file loads as if it had LF line ends. */
START_TEST(load_refuses_binary_files_and_reads_crlf_as_lf)
{
    generate_turn("Hello");
    int n = S.n_tokens;
    const struct {
        const char *bytes;
        size_t len;
        const char *msg;
    } bad[] = {
        {"ELF\x7f\x00\x01", 6, "neither a session file nor text: a NUL byte at offset 4"},
        {"caf\xe9 au lait", 12, "neither a session file nor UTF-8 text: byte 0xe9 at offset 3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *path = tu_path("%s/binary%zu", work_dir, i);
        ck_assert_int_eq(tu_write_file(path, bad[i].bytes, bad[i].len), 0);
        char line[512];
        snprintf(line, sizeof line, "/load! %s", path);
        ck_assert_int_eq(run(line), CMD_ERROR);
        ck_out_has(path);
        ck_out_has(bad[i].msg);
        ck_assert_int_eq(S.n_tokens, n);
    }
    const char *path = tu_path("%s/crlf.txt", work_dir);
    ck_assert_int_eq(tu_write_file(path, "In the\r\nbeginning\r\n", 19), 0);
    char line[512];
    snprintf(line, sizeof line, "/load! %s", path);
    ck_assert_int_eq(run(line) & CMD_ERROR, 0);
    char *text = session_text(&S, 0, S.n_tokens);
    ck_assert_str_eq(text, "In the\nbeginning\n");
    free(text);
}
END_TEST

/* A conversation longer than the context is loaded with a notice of what the next turn does. */
START_TEST(load_says_when_the_conversation_exceeds_the_context)
{
    size_t len = (size_t)eng->n_ctx * 8;
    char *big = malloc(len);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < len; i++)
        big[i] = (i % 7 == 6) ? ' ' : (char)('a' + i % 23);
    const char *path = tu_path("%s/long.txt", work_dir);
    ck_assert_int_eq(tu_write_file(path, big, len), 0);
    free(big);
    char line[512];
    snprintf(line, sizeof line, "/load! %s", path);
    ck_assert_int_eq(run(line) & CMD_ERROR, 0);
    ck_assert_int_gt(S.n_tokens, eng->n_ctx);
    ck_out_has("more than the context holds");
}
END_TEST

/* /save does not replace a file unless told (/save! FILE); /load does not drop a conversation
 * that was not saved unless told (/load! FILE); ~ is the home directory. */
START_TEST(save_and_load_ask_before_losing_work_and_expand_the_home_directory)
{
    setenv("HOME", work_dir, 1);
    generate_turn("Hello");
    ck_assert_msg(run("/save ~/mine.json") == CMD_DONE, "%s", out());
    const char *path = tu_path("%s/mine.json", work_dir);
    ck_out_has(path);
    ck_out_has("in 1 turn and");   /* one turn, not "1 turns" */
    ck_assert_int_eq(access(path, F_OK), 0);
    ck_assert_int_eq(run("/save ~/mine.json"), CMD_ERROR);
    ck_out_has("exists: /save! ~/mine.json replaces it");
    ck_assert_int_eq(run("/save! ~/mine.json"), CMD_DONE);
    /* saved: /load goes ahead; then a new turn is not saved, and /load asks */
    ck_assert_int_eq(run("/load ~/mine.json") & CMD_ERROR, 0);
    int n = S.n_tokens;
    generate_turn(" again");
    ck_assert_int_gt(S.n_tokens, n);
    int grown = S.n_tokens;
    ck_assert_int_eq(run("/load ~/mine.json"), CMD_ERROR);
    ck_out_has("is not saved: /save FILE first, or /load! ~/mine.json to replace it");
    ck_assert_int_eq(S.n_tokens, grown);
    ck_assert_int_eq(run("/load! ~/mine.json") & CMD_ERROR, 0);
    ck_assert_int_eq(S.n_tokens, n);
}
END_TEST

START_TEST(session_file_parses_a_buffer_without_the_file_system)
{
    run("/topk 7");
    generate_turn("Hello");
    size_t len = 0;
    char *buf = session_file_serialize(&S, "tiny", &len);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(strlen(buf), len);
    session_file f;
    tt_error err = {0};
    /* the settings fields absent from a file keep the defaults (no base given) */
    ck_assert_msg(session_file_parse(buf, len, "mem", 512, NULL, &f, &err) == TT_OK, "%s",
                  err.msg);
    ck_assert(!f.plain);
    ck_assert_ptr_null(f.text);
    ck_assert_int_eq(f.n, S.n_tokens);
    for (int i = 0; i < f.n; i++) {
        ck_assert_int_eq(f.ids[i], S.tokens[i]);
        ck_assert_int_eq(f.info[i].origin, S.info[i].origin);
    }
    ck_assert_int_eq(f.sampler.top_k, 7);
    ck_assert_int_eq(f.max_new_tokens, S.set.max_new_tokens);
    session_file_free(&f);
    /* the same bytes against another vocabulary: refused, naming the buffer and the field */
    ck_assert_int_eq(session_file_parse(buf, len, "mem", 100, NULL, &f, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "mem: vocab_size: 512 does not match the model's 100"), "%s",
                  err.msg);
    /* a buffer cut anywhere inside the JSON is refused, never read past its end */
    ck_assert_int_eq(session_file_parse(buf, len / 2, "mem", 512, NULL, &f, &err),
                     TT_ERR_FORMAT);
    ck_assert(strstr(err.msg, "mem: not valid JSON"));
    free(buf);
    /* not JSON: plain text, taken whole (no NUL needed) */
    const char plain[4] = {' ', 'a', 'b', 'c'};
    ck_assert_int_eq(session_file_parse(plain, 3, "mem", 512, NULL, &f, &err), TT_OK);
    ck_assert(f.plain);
    ck_assert_uint_eq(f.text_len, 3);
    ck_assert_str_eq(f.text, " ab");
    session_file_free(&f);
}
END_TEST

/* Found by fuzzing (tests/fuzz/corpus/session_file/crash-empty-file): an empty file is plain text
 * with no tokens, and the copy of its NULL id array was undefined behaviour (UBSan stopped). */
START_TEST(load_of_an_empty_file_empties_the_conversation)
{
    int32_t ids[] = {1, 2, 3};
    tt_error err = {0};
    ck_assert_int_eq(session_set_tokens(&S, ids, NULL, 3, &err), TT_OK);
    const char *path = tu_path("%s/empty.txt", work_dir);
    ck_assert_int_eq(tu_write_file(path, "", 0), 0);
    char line[512];
    snprintf(line, sizeof line, "/load! %s", path);
    ck_assert_int_eq(run(line) & CMD_ERROR, 0);
    ck_assert_int_eq(S.n_tokens, 0);
    ck_assert_int_eq(S.n_turns, 0);
    /* the same through the buffer API (what the session_file fuzzer drives) */
    ck_assert_int_eq(session_set_tokens(&S, ids, NULL, 3, &err), TT_OK);
    session_file f;
    ck_assert_int_eq(session_file_parse("", 0, "empty", 512, NULL, &f, &err), TT_OK);
    ck_assert(f.plain);
    ck_assert_uint_eq(f.text_len, 0);
    int n = -1;
    ck_assert_msg(session_file_apply(&S, &f, &n, &err) == TT_OK, "%s", err.msg);
    session_file_free(&f);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(S.n_tokens, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("commands");
    TCase *tc = tu_add_case(s, "commands", TU_TESTS(
            exact_names_aliases_and_unique_prefixes_find_commands,
            ambiguous_prefix_lists_the_candidates, unknown_command_says_how_to_get_help,
            help_is_generated_from_the_table, every_command_has_a_usage_line_and_a_group,
            wrong_argument_counts_print_the_usage,
            sampler_commands_validate_and_keep_the_old_value,
            sampler_command_messages_name_the_change, defaults_restore_the_starting_settings,
            greedy_and_sample_switch_the_mode,
            seed_restarts_the_random_stream, max_accepts_positive_token_counts,
            stop_adds_lists_and_clears_stop_strings, bars_sets_the_histogram_height,
            show_reports_settings_model_and_cache, speculative_commands_drive_the_session,
            model_shows_the_model_and_needs_a_host_to_open_another,
            pace_sets_the_rate_and_refuses_bad_values,
            quit_asks_the_loop_to_leave, reset_clears_conversation_and_cache,
            undo_drops_the_last_turn_or_n_tokens_and_truncates_the_cache, undo_refuses_bad_counts,
            regen_drops_the_reply_and_asks_for_a_generation,
            regen_after_context_shifts_has_the_prompt_to_run_on,
            editing_commands_are_refused_while_generating, step_mode_needs_the_terminal,
            pick_replaces_the_token_just_stepped, pick_from_a_peek_chooses_the_next_token,
            arguments_split_with_quotes_and_escapes, commands_and_text_are_told_apart,
            prompts_start_a_new_line_unless_they_continue_the_text,
            chat_switches_the_format_and_refuses_unknown_names,
            system_sets_shows_and_clears_the_system_message,
            save_then_load_restores_tokens_and_settings_with_prefix_reuse,
            load_refuses_bad_files_and_changes_nothing, load_of_a_text_file_makes_it_the_prompt,
            load_of_an_empty_file_empties_the_conversation,
            load_refuses_binary_files_and_reads_crlf_as_lf,
            load_says_when_the_conversation_exceeds_the_context,
            save_and_load_ask_before_losing_work_and_expand_the_home_directory,
            session_file_parses_a_buffer_without_the_file_system));
    tcase_set_timeout(tc, 60);
    tcase_add_unchecked_fixture(tc, files_setup, files_teardown);
    tcase_add_checked_fixture(tc, cmd_session_open, cmd_session_close);
    return tu_run_suite(s);
}
