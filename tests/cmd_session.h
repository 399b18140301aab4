/* cmd_session.h: the fixture of the slash-command suites (check_commands.c, check_compare.c): a
 * session on a tiny random model (seed 42, 8 new tokens a turn, one engine thread) and its command
 * environment. Defines file-scope state and static functions: include it from one suite's .c
 * only, once. */
#ifndef TOKENTOP_TESTS_CMD_SESSION_H
#define TOKENTOP_TESTS_CMD_SESSION_H

#include <check.h>

#include "app/cli.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/session/session.h"
#include "core/tokenizer/tokenizer.h"
#include "repl/commands.h"
#include "repl/attn_cmd.h"
#include "repl/chat_cmd.h"
#include "repl/compare.h"
#include "repl/dtype_cmd.h"
#include "repl/lens_cmd.h"
#include "repl/model_cmd.h"
#include "tests/testutil.h"

static char *model_dir;   /* written once by the unchecked fixture */
static model *mdl;
static tokenizer *tok;
static engine *eng;
static session S;
static cmd_env E;

/* Per test (in the forked child, so engine threads belong to it). */
static void cmd_session_open(void)
{
    tt_error err = {0};
    ck_assert_msg(model_load(model_dir, &mdl, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(tokenizer_load_dir(model_dir, &tok, &err) == TT_OK, "%s", err.msg);
    eng = tu_cpu_engine(mdl, TT_F32, 1, 0);
    tu_session_init(&S, mdl, tok, eng, 42, 8, false);
    cmd_env_init(&E, &S);
    /* Every command module the REPL offers. */
    cmd_env_add_module(&E, &compare_cmd_module);
    cmd_env_add_module(&E, &dtype_cmd_module);
    cmd_env_add_module(&E, &chat_cmd_module);
    cmd_env_add_module(&E, &model_cmd_module);
    cmd_env_add_module(&E, &lens_cmd_module);
    cmd_env_add_module(&E, &attn_cmd_module);
}

static void cmd_session_close(void)
{
    cmd_env_free(&E);
    session_free(&S);
    engine_free(eng);
    tokenizer_free(tok);
    model_free(mdl);
}

/* Runs a command line; returns the flags. */
static int run(const char *line)
{
    return cmd_execute(&E, line);
}

#endif
