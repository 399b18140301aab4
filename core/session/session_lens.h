/* session_lens.h: the logit lens at a position of a conversation (core/engine/lens.h): what each
 * layer of the session's engine would predict there, computed on demand, so that the engine keeps
 * nothing while it generates. */
#ifndef TOKENTOP_SESSION_LENS_H
#define TOKENTOP_SESSION_LENS_H

#include <stdint.h>

#include "core/base/status.h"
#include "core/engine/lens.h"
#include "core/session/session.h"

/* The lens of the distribution the model gives for conversation index pos (window_start < pos
 * <= n_tokens): out[l] for l = 0 .. L, each with its k most probable tokens and the place of
 * *chosen: the token at pos when pos < n_tokens (the one drawn there), else (the next token, not
 * drawn yet) the output's top-1. It forwards the window up to pos with the engine keeping its residual stream (the
 * cache reuses every position before pos - 1, so one token when pos is the last step), then
 * gives the cache and the last logits back as they were (one token more when pos lay before the
 * cache's end), so a step-mode generation goes on as if nothing ran. Not while a generation
 * streams. Fails with TT_ERR_ARG for a pos outside the window ("token 3 is no longer in the
 * context window" or past the conversation), else with the engine's error (the cache then holds
 * a prefix of the window, as engine_sync leaves it). */
tt_status session_lens(session *s, int pos, int k, lens_layer *out, int32_t *chosen,
                       tt_error *err);

#endif
