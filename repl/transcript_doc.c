/* transcript_doc.c: the transcript document built from the session and the notices. */
#include "repl/transcript_doc.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"
#include "core/base/util.h"

void transcript_doc_init(transcript_doc *t)
{
    memset(t, 0, sizeof *t);
    ui_doc_init(&t->doc);
    utf8_stream_init(&t->utf8);
    t->eot = -1;
    t->rejected_id = -1;
}

void transcript_doc_free(transcript_doc *t)
{
    if (!t)
        return;
    ui_doc_free(&t->doc);
    free(t->ids);
    free(t->origin);
    free(t->span);
    for (int i = 0; i < t->n_notes; i++)
        free(t->notes[i].text);
    free(t->notes);
    memset(t, 0, sizeof *t);
}

void transcript_doc_note_add(transcript_doc *t, int n_tokens, uint8_t style, const char *text)
{
    if (!UTIL_RESERVE(t->notes, &t->notes_cap, (size_t)t->n_notes + 1, 32))
        return;
    char *copy = strdup(text);
    if (!copy)
        return;
    t->notes[t->n_notes++] = (transcript_doc_note){.text = copy, .anchor = n_tokens,
                                                   .style = style};
}

void transcript_doc_clear(transcript_doc *t)
{
    for (int i = 0; i < t->n_notes; i++)
        free(t->notes[i].text);
    t->n_notes = t->notes_done = 0;
    t->n_done = 0;
    t->rejected_id = -1;
    t->rejected_shown = false;
    ui_doc_clear(&t->doc);
    utf8_stream_init(&t->utf8);
}

void transcript_doc_token_style(token_origin origin, float p, uint8_t *style, uint8_t *attr)
{
    *attr = 0;
    if (origin == TOKEN_USER) {
        *style = UI_STYLE_USER;
        return;
    }
    *style = p >= 0.8f ? UI_STYLE_P_HIGH : p >= 0.5f ? UI_STYLE_P_MID : p >= 0.2f ? UI_STYLE_P_LOW
           : p >= 0.05f ? UI_STYLE_P_VLOW : UI_STYLE_P_RARE;
    switch (origin) {
    case TOKEN_FORCED: *attr = UI_ATTR_UNDERLINE; break;
    /* The speculative origins get their own marks so the speculative view can tell them apart. */
    case TOKEN_DRAFT_ACCEPTED: *attr = UI_ATTR_BOLD; break;
    case TOKEN_TARGET_RESAMPLE: *attr = UI_ATTR_UNDERLINE | UI_ATTR_BOLD; break;
    case TOKEN_BONUS: *attr = UI_ATTR_BOLD; break;
    default: break;
    }
}

/* Control characters other than newline and tab would move the terminal's cursor: show them as
 * escapes. */
static void append_text(ui_doc *d, const char *s, size_t n, uint8_t style, uint8_t attr)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && ((unsigned char)s[j] >= 0x20 || s[j] == '\n' || s[j] == '\t') &&
               s[j] != 0x7f)
            j++;
        ui_doc_append(d, s + i, j - i, style, attr);
        if (j < n) {
            char esc[8];
            size_t k = text_token_display(s + j, 1, TEXT_ESCAPE_WHITESPACE, esc, sizeof esc);
            ui_doc_append(d, esc, k, UI_STYLE_DIM, 0);
            j++;
        }
        i = j;
    }
}

static void append_note(transcript_doc *t, const transcript_doc_note *n)
{
    ui_doc *d = &t->doc;
    /* A character split across tokens cannot wait across a notice: show what is pending. */
    char flushed[32];
    size_t k = utf8_stream_flush(&t->utf8, flushed, sizeof flushed);
    if (k)
        ui_doc_append(d, flushed, k, UI_STYLE_DIM, 0);
    if (!ui_doc_at_line_start(d))
        ui_doc_append_cp(d, '\n', n->style, 0);
    t->last_note_at = d->n;
    append_text(d, n->text, strlen(n->text), n->style, 0);
    ui_doc_append_cp(d, '\n', n->style, 0);
}

static void append_token(transcript_doc *t, const session *s, int i)
{
    int32_t id = s->tokens[i];
    token_origin origin = (token_origin)s->info[i].origin;
    size_t nb = 0;
    const char *b = tokenizer_token_bytes(s->tok, id, &nb);
    if (id == t->eot || tokenizer_is_special(s->tok, id)) {
        /* A marker in its own colour, not text: "<|endoftext|>", "<|im_end|>", "</s>". */
        char shown[256];
        size_t k = b ? text_token_display(b, nb, TEXT_ESCAPE_BYTES, shown, sizeof shown) : 0;
        ui_doc_append(&t->doc, shown, k, UI_STYLE_SPECIAL, 0);
        return;
    }
    uint8_t style, attr;
    transcript_doc_token_style(origin, s->info[i].p, &style, &attr);
    if (!b)
        return;
    char out[3 * (64 + 8)];
    const char *src = b;
    size_t left = nb;
    while (left > 0) {
        size_t chunk = left < 64 ? left : 64;
        size_t k = utf8_stream_push(&t->utf8, src, chunk, out, sizeof out);
        append_text(&t->doc, out, k, style, attr);
        src += chunk;
        left -= chunk;
    }
}

/* The rejected draft: its text in the error colour, dimmed, and not through the UTF-8 stream (it is
 * not part of the text; a partial character shows as escapes). */
static void append_rejected(transcript_doc *t, const session *s)
{
    size_t nb = 0;
    const char *b = tokenizer_token_bytes(s->tok, t->rejected_id, &nb);
    char buf[256];
    size_t k = text_token_display(b ? b : "", b ? nb : 0, TEXT_ESCAPE_BYTES, buf, sizeof buf);
    ui_doc_append(&t->doc, buf, k, UI_STYLE_ERROR, UI_ATTR_DIM | UI_ATTR_UNDERLINE);
    t->rejected_shown = true;
}

void transcript_doc_set_rejected(transcript_doc *t, int at, int32_t id)
{
    if (id == t->rejected_id && (id < 0 || at == t->rejected_at))
        return;
    if (t->rejected_shown || (id >= 0 && at < t->n_done)) {
        /* rebuild at the next sync: the mark sits (or goes) inside the document */
        t->n_done = 0;
        t->notes_done = 0;
        t->rejected_shown = false;
        ui_doc_clear(&t->doc);
        utf8_stream_init(&t->utf8);
    }
    t->rejected_id = id;
    t->rejected_at = at;
}

static bool remember(transcript_doc *t, int32_t id, uint8_t origin)
{
    if (t->n_done == t->cap) {
        int cap = t->cap ? t->cap * 2 : 1024;
        int32_t *ids = realloc(t->ids, (size_t)cap * sizeof *ids);
        if (!ids)
            return false;
        t->ids = ids;
        uint8_t *o = realloc(t->origin, (size_t)cap);
        if (!o)
            return false;
        t->origin = o;
        size_t *sp = realloc(t->span, 2 * (size_t)cap * sizeof *sp);
        if (!sp)
            return false;
        t->span = sp;
        t->cap = cap;
    }
    t->ids[t->n_done] = id;
    t->origin[t->n_done] = origin;
    t->n_done++;
    return true;
}

bool transcript_doc_token_span(const transcript_doc *t, int i, size_t *begin, size_t *end)
{
    if (i < 0 || i >= t->n_done)
        return false;
    *begin = t->span[2 * i];
    *end = t->span[2 * i + 1];
    return true;
}

void transcript_doc_sync(transcript_doc *t, const session *s)
{
    t->eot = tokenizer_eot_id(s->tok);
    /* The first token where the document and the conversation disagree. */
    int d = t->n_done < s->n_tokens ? t->n_done : s->n_tokens;
    for (int i = 0; i < d; i++)
        if (t->ids[i] != s->tokens[i] || t->origin[i] != s->info[i].origin) {
            d = i;
            break;
        }
    if (d < t->n_done) {
        for (int i = 0; i < t->n_notes; i++)
            if (t->notes[i].anchor > d)
                t->notes[i].anchor = d;
        t->n_done = 0;
        t->notes_done = 0;
        t->rejected_shown = false;
        ui_doc_clear(&t->doc);
        utf8_stream_init(&t->utf8);
    }
    for (;;) {
        if (t->notes_done < t->n_notes && t->notes[t->notes_done].anchor <= t->n_done) {
            append_note(t, &t->notes[t->notes_done++]);
            continue;
        }
        if (t->n_done < s->n_tokens) {
            int i = t->n_done;
            if (!remember(t, s->tokens[i], s->info[i].origin))
                return;
            if (t->rejected_id >= 0 && i == t->rejected_at && !t->rejected_shown)
                append_rejected(t, s);
            t->span[2 * i] = t->doc.n;
            append_token(t, s, i);
            t->span[2 * i + 1] = t->doc.n;
            continue;
        }
        break;
    }
}
