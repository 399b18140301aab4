/* transcript_doc.h: keeps the transcript document (ui/transcript_pane.h) in step with the
 * session: the conversation's tokens, styled by who wrote them and the probability they were drawn
 * with, and the notices (command output, stop reasons) shown between turns. New tokens are
 * appended as they come; an edit of the past (undo, regen, load, pick) rebuilds the document. */
#ifndef TOKENTOP_REPL_TRANSCRIPT_DOC_H
#define TOKENTOP_REPL_TRANSCRIPT_DOC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tokenizer/tokenizer.h"
#include "core/session/session.h"
#include "ui/transcript_pane.h"

typedef struct {
    char *text;
    int anchor;          /* shown before token `anchor` of the conversation */
    uint8_t style;       /* ui_style */
} transcript_doc_note;

typedef struct {
    ui_doc doc;              /* what the pane draws */
    int32_t *ids;            /* (n_done) the tokens already in doc, to notice edits of the past */
    uint8_t *origin;         /* (n_done) */
    int n_done, cap;
    size_t *span;            /* (2 n_done) where each token's characters begin and end in doc
                                (a character split across tokens counts for the later one) */
    utf8_stream utf8;        /* characters split across tokens */
    transcript_doc_note *notes;  /* (n_notes) in the order they were made */
    int n_notes, notes_done;
    size_t notes_cap;
    int32_t eot;             /* the end-of-text token (drawn as a marker), or -1 */
    size_t last_note_at;     /* where in doc the notice shown last begins */
    /* A speculative round's rejected draft token, shown (in the rejection style) just before
     * the token that replaced it until the next round clears it: */
    int32_t rejected_id;     /* -1: none */
    int rejected_at;         /* conversation index of the replacement */
    bool rejected_shown;     /* the document holds the mark */
} transcript_doc;

void transcript_doc_init(transcript_doc *t);
void transcript_doc_free(transcript_doc *t);   /* NULL is safe */

/* Adds a notice (may span lines) after the current end of the conversation (n_tokens). */
void transcript_doc_note_add(transcript_doc *t, int n_tokens, uint8_t style, const char *text);

/* Forgets the notices and the document (/reset, /load). */
void transcript_doc_clear(transcript_doc *t);

/* Shows token id as a rejected draft just before conversation index at (the replacement's);
 * id < 0 removes the mark. The next transcript_doc_sync redraws accordingly. */
void transcript_doc_set_rejected(transcript_doc *t, int at, int32_t id);

/* Brings the document up to date with s: appends what is new, or rebuilds from the first token
 * that differs (notices anchored past it move to that point). */
void transcript_doc_sync(transcript_doc *t, const session *s);

/* Where conversation token i's characters are in t->doc: [*begin, *end). False when i is not in
 * the document. */
bool transcript_doc_token_span(const transcript_doc *t, int i, size_t *begin, size_t *end);

/* The style and attributes of a conversation token (exposed for tests and the legend). */
void transcript_doc_token_style(token_origin origin, float p, uint8_t *style, uint8_t *attr);

#endif
