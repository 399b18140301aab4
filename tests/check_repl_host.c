/* check_repl_host.c: what the REPL lends its commands (repl/repl_host.c) and /model over it
 * (repl/model_cmd.c), on tiny random models and the committed GGUF fixture: a name, path or file
 * that cannot be opened is refused in one line naming it and the session keeps its model and
 * conversation; a model that opens replaces model, tokenizer, engine and chat format, clears the
 * conversation with a note, and generates; a draft is kept when it fits the new model and
 * detached with a note when it does not; /dtype's comparison engine goes with the old model. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "core/session/session.h"
#include "repl/commands.h"
#include "repl/compare.h"
#include "repl/dtype_cmd.h"
#include "repl/model_cmd.h"
#include "repl/repl_host.h"
#include "tests/testutil.h"

static char *dir_a, *dir_b;   /* two tiny random GPT-2 models (the same tokenizer), by the
                                 unchecked fixture */
static cli_options O;
static cli_app A;
static session S;
static cmd_env E;
static repl_host H;

static void files_setup(void)
{
    dir_a = tu_tiny_model_dir(64);
    dir_b = tu_tiny_model_dir(64);
}

static void files_teardown(void)
{
    tu_tmpdir_free(dir_a);
    tu_tmpdir_free(dir_b);
}

static const char *gguf_fixture(void)
{
    const char *srcdir = getenv("TOKENTOP_SRCDIR");
    return tu_path("%s/tests/fixtures/gguf/tiny-llama-f32.gguf", srcdir ? srcdir : ".");
}

/* As the REPL starts: the app from the options, the session, the environment and its host. */
static void repl_open(void)
{
    cli_options_default(&O);
    O.model_dir = dir_a;
    O.backend = "cpu";
    O.n_threads = 1;
    ck_assert_int_eq(cli_app_load(&A, &O, false), TT_OK);
    tu_session_init(&S, A.model, A.tok, A.eng, 42, 4, true);
    cli_session_chat(&A, &S);
    cmd_env_init(&E, &S);
    cmd_env_add_module(&E, &compare_cmd_module);
    cmd_env_add_module(&E, &dtype_cmd_module);
    cmd_env_add_module(&E, &model_cmd_module);
    repl_host_init(&H, &A, &O, &S, &E);
}

static void repl_close(void)
{
    cmd_env_free(&E);
    session_free(&S);
    repl_host_free(&H);
    cli_app_free(&A);
}

/* A first turn, so there is a conversation to keep or clear. */
static void one_turn(void)
{
    tt_error err = {0};
    ck_assert_msg(session_add_user_text(&S, "hello", 5, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(session_generate(&S, NULL, NULL, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_gt(S.n_tokens, 0);
}

#define ck_out_has(text) ck_assert_msg(strstr(E.out, text), "'%s' not in: %s", text, E.out)

/* The refusal is one line naming what was tried; the session is as it was. */
static void ck_refused(const char *line, const char *names)
{
    const model *m = S.model;
    const engine *eng = S.eng;
    int n = S.n_tokens;
    ck_assert_int_eq(cmd_execute(&E, line), CMD_ERROR);
    ck_out_has(names);
    ck_out_has("(kept ");
    ck_assert_msg(!strchr(E.out, '\n'), "more than one line: %s", E.out);
    ck_assert_ptr_eq(S.model, m);
    ck_assert_ptr_eq(S.eng, eng);
    ck_assert_ptr_eq(A.model, m);
    ck_assert_int_eq(S.n_tokens, n);
}

START_TEST(model_refuses_what_cannot_be_opened_and_keeps_the_model)
{
    one_turn();
    ck_refused("/model /nonexistent/model", "/nonexistent/model: no such directory");
    char *tmp = tu_tmpdir();
    const char *junk = tu_path("%s/junk.gguf", tmp);
    FILE *f = fopen(junk, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a model", f);
    fclose(f);
    ck_refused(tu_path("/model %s", junk), junk);
    /* A name that is not a path: looked up in the Ollama store, which says where it looked. */
    setenv("OLLAMA_MODELS", tmp, 1);
    setenv("HOME", tmp, 1);
    ck_refused("/model nosuch:7b", "nosuch:7b: not in the Ollama store (looked for");
    ck_out_has(tmp);
    /* ... but a missing file's name is not a model Ollama pulled */
    ck_refused("/model nosuch.gguf", "nosuch.gguf: no such file");
    /* ~ is the home directory, as for /save and /load. */
    ck_refused("/model ~/nothing", tu_path("%s/nothing: no such directory", tmp));
    tu_tmpdir_free(tmp);
    /* The model still generates. */
    one_turn();
}
END_TEST

START_TEST(model_opens_a_gguf_file_and_clears_the_conversation)
{
    one_turn();
    int n = S.n_tokens;
    const model *old = S.model;
    int r = cmd_execute(&E, tu_path("/model %s", gguf_fixture()));
    ck_assert_msg(r == (CMD_CONV | CMD_CLEAR | CMD_STATUS | CMD_PEEK), "%d: %s", r, E.out);
    ck_assert_ptr_ne(S.model, old);
    ck_assert_ptr_eq(S.model, A.model);
    ck_assert_ptr_eq(S.tok, A.tok);
    ck_assert_ptr_eq(S.eng, A.eng);
    ck_assert_str_eq(S.model->config.arch->name, "llama");
    ck_assert_str_eq(S.eng->ops->name, "cpu");
    ck_assert_int_eq(S.n_tokens, 0);
    ck_assert_int_eq(S.eng->n_past, 0);
    ck_out_has("model tiny-llama-f32.gguf");
    ck_out_has(tu_path("the conversation (%d tokens of ", n));
    ck_out_has("is cleared");
    ck_assert_str_eq(E.model_name, "tiny-llama-f32.gguf");
    ck_assert_str_eq(E.engine_desc, S.eng->description);
    /* It generates, in its own vocabulary. */
    one_turn();
    for (int i = 0; i < S.n_tokens; i++)
        ck_assert_int_lt(S.tokens[i], S.model->config.V);
    ck_assert_int_eq(cmd_execute(&E, "/model"), CMD_DONE);
    ck_out_has("model tiny-llama-f32.gguf");
    ck_out_has("llama");
}
END_TEST

START_TEST(model_keeps_a_draft_that_fits_and_detaches_one_that_does_not)
{
    tt_error err = {0};
    ck_assert_msg(repl_host_load_draft(&H, dir_a, &err) == TT_OK, "%s", err.msg);
    session_set_speculative(&S, false, NULL);
    ck_assert_ptr_nonnull(S.draft);
    /* Another model with the same tokenizer: the draft is loaded again beside it, still off. */
    ck_assert_int_ne(cmd_execute(&E, tu_path("/model %s", dir_b)), CMD_ERROR);
    ck_out_has("kept: it fits the new model");
    ck_assert_ptr_nonnull(S.draft);
    ck_assert_ptr_eq(S.draft, H.draft.eng);
    ck_assert(!S.spec_on);
    ck_assert_str_eq(E.draft_dir, dir_a);
    one_turn();
    /* A model of another vocabulary: the draft is detached, with the reason. */
    ck_assert_int_ne(cmd_execute(&E, tu_path("/model %s", gguf_fixture())), CMD_ERROR);
    ck_out_has("its tokenizer differs from the target");
    ck_out_has("the draft is detached");
    ck_assert_ptr_null(S.draft);
    ck_assert_ptr_null(H.draft.eng);
    ck_assert_ptr_null(E.draft_dir);
    ck_assert(!S.spec_on);
    one_turn();
}
END_TEST

START_TEST(model_turns_off_the_precision_comparison)
{
    ck_assert_int_ne(cmd_execute(&E, "/dtype compare fp16"), CMD_ERROR);
    ck_assert_ptr_nonnull(dtype_cmd_of(&E)->cmp);
    ck_assert_int_ne(cmd_execute(&E, tu_path("/model %s", dir_b)), CMD_ERROR);
    ck_out_has("the fp16 comparison is off");
    ck_assert_ptr_null(dtype_cmd_of(&E)->cmp);
    /* A /dtype switch is kept for the next model: the precision was chosen. */
    ck_assert_int_ne(cmd_execute(&E, "/dtype fp16"), CMD_ERROR);
    ck_assert_int_ne(cmd_execute(&E, tu_path("/model %s", dir_a)), CMD_ERROR);
    ck_assert_int_eq(S.eng->dtype, TT_F16);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("repl_host");
    TCase *tc = tu_add_case(s, "repl_host", TU_TESTS(
            model_refuses_what_cannot_be_opened_and_keeps_the_model,
            model_opens_a_gguf_file_and_clears_the_conversation,
            model_keeps_a_draft_that_fits_and_detaches_one_that_does_not,
            model_turns_off_the_precision_comparison));
    tcase_set_timeout(tc, 60);
    tcase_add_unchecked_fixture(tc, files_setup, files_teardown);
    tcase_add_checked_fixture(tc, repl_open, repl_close);
    return tu_run_suite(s);
}
