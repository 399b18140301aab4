/* attn_json.h: `generate --json --attention [avg|layers]`: what each record's step attended to
 * (core/session/attention_view.h), as the top earlier tokens with their weights, best first. */
#ifndef TOKENTOP_APP_ATTN_JSON_H
#define TOKENTOP_APP_ATTN_JSON_H

#include <stdio.h>

#include "core/session/attention_view.h"
#include "core/session/session.h"

/* Positions a record lists: for the mean, and for each layer. */
#define ATTN_JSON_TOP 8
#define ATTN_JSON_LAYER_TOP 5

/* Writes `,"attention":[{"pos":P,"token":T,"w":W},...]` (mode CLI_ATTENTION_AVG: the mean over
 * layers and heads) or `,"attention_layers":[[...],...]` (CLI_ATTENTION_LAYERS: one list per layer,
 * the mean over its heads) for ev, during its callback; pos is the token's index in the
 * conversation. Turns the engine's capture on when it is off (after a device fallback to a new
 * engine: that record then has none); writes null for the key when no row was kept. v is the
 * caller's scratch (attention_view_init'd). */
void attn_json_record(FILE *f, session *s, const session_event *ev, int mode, attention_view *v);

#endif
