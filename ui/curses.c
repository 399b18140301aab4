/* curses.c: ncursesw output of the cell grid, key input, and terminal restoration. */
#include "ui/curses.h"

#include <curses.h>
#include <locale.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>
#include <wchar.h>

#include "core/base/clock.h"

/* term.h names every terminfo capability as a macro; this one collides with a grid field. */
#undef cursor_visible

#define PASTE_ON "\033[?2004h"
#define PASTE_OFF "\033[?2004l"

enum {
    KC_PASTE_BEGIN = KEY_MAX + 1,
    KC_PASTE_END,
};

static bool active;
static SCREEN *screen;
static struct termios saved_termios;
static bool have_saved_termios;
static char emergency_seq[256];
static size_t emergency_len;
static bool ascii_only;   /* the terminal shows only ASCII: see terminal_is_utf8 */
static attr_t style_attr[UI_STYLE_COUNT];
static short style_pair[UI_STYLE_COUNT];

/* ---------------------------------------------------------------------------------------------
 * Styles */

typedef struct {
    short fg, bg;       /* -1: the terminal's default */
    attr_t color_attr;  /* added when colors are on */
    attr_t mono_attr;   /* used when they are not */
} style_def;

static const style_def style_defs[UI_STYLE_COUNT] = {
    [UI_STYLE_NORMAL] = {-1, -1, 0, 0},
    [UI_STYLE_USER] = {COLOR_CYAN, -1, A_BOLD, A_BOLD},
    [UI_STYLE_P_HIGH] = {-1, -1, 0, 0},
    [UI_STYLE_P_MID] = {COLOR_GREEN, -1, 0, 0},
    [UI_STYLE_P_LOW] = {COLOR_YELLOW, -1, 0, A_DIM},
    [UI_STYLE_P_VLOW] = {COLOR_MAGENTA, -1, 0, A_UNDERLINE},
    [UI_STYLE_P_RARE] = {COLOR_RED, -1, A_BOLD, A_REVERSE},
    [UI_STYLE_SPECIAL] = {COLOR_MAGENTA, -1, A_DIM, A_DIM},
    [UI_STYLE_NOTICE] = {COLOR_BLUE, -1, A_BOLD, A_DIM},
    [UI_STYLE_ERROR] = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [UI_STYLE_DIM] = {-1, -1, A_DIM, A_DIM},
    [UI_STYLE_TITLE] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [UI_STYLE_BORDER] = {-1, -1, A_DIM, A_DIM},
    [UI_STYLE_STATUS] = {COLOR_BLACK, COLOR_CYAN, 0, A_REVERSE},
    [UI_STYLE_BAR] = {COLOR_GREEN, -1, 0, 0},
    [UI_STYLE_BAR_RAW] = {COLOR_GREEN, -1, A_DIM, A_DIM},
    [UI_STYLE_BAR_CUT] = {COLOR_RED, -1, A_DIM, A_DIM},
    [UI_STYLE_CUT] = {COLOR_RED, -1, 0, A_UNDERLINE},
    [UI_STYLE_CHOSEN] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD | A_REVERSE},
    [UI_STYLE_DRAW] = {COLOR_YELLOW, -1, 0, A_BOLD},
    [UI_STYLE_PROMPT] = {COLOR_GREEN, -1, A_BOLD, A_BOLD},
    [UI_STYLE_ATTN_HOT] = {COLOR_BLACK, COLOR_YELLOW, A_BOLD, A_BOLD | A_REVERSE},
    [UI_STYLE_ATTN_WARM] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [UI_STYLE_ATTN_MILD] = {COLOR_CYAN, -1, 0, A_UNDERLINE},
};

static void setup_styles(void)
{
    bool color = has_colors() && start_color() == OK;
    if (color)
        use_default_colors();
    for (int i = 0; i < UI_STYLE_COUNT; i++) {
        const style_def *d = &style_defs[i];
        style_pair[i] = 0;
        if (color && (d->fg >= 0 || d->bg >= 0)) {
            init_pair((short)(i + 1), d->fg, d->bg);
            style_pair[i] = (short)(i + 1);
        }
        style_attr[i] = color ? d->color_attr : d->mono_attr;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Start and stop */

static void add_cap(const char *name)
{
    char *s = tigetstr((char *)name);
    if (!s || s == (char *)-1)
        return;
    size_t n = strlen(s);
    if (emergency_len + n < sizeof emergency_seq) {
        memcpy(emergency_seq + emergency_len, s, n);
        emergency_len += n;
    }
}

/* Whether the terminal shows UTF-8, judged as tmux and less do, from the locale the environment
 * names (LC_ALL, else LC_CTYPE, else LANG), not from the process's locale: the REPL switches its
 * own LC_CTYPE to C.UTF-8 to handle token text, which says nothing about the terminal. With
 * LANG=C (or none), each cell is drawn as its ASCII look-alike (ui_ascii_fallback). */
static bool terminal_is_utf8(void)
{
    const char *vars[] = {"LC_ALL", "LC_CTYPE", "LANG"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return strcasestr(v, "UTF-8") || strcasestr(v, "utf8");
    }
    return false;
}

bool ui_curses_start(char *why, size_t cap)
{
    if (active)
        return true;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        snprintf(why, cap, "not a terminal");
        return false;
    }
    have_saved_termios = tcgetattr(STDIN_FILENO, &saved_termios) == 0;
    screen = newterm(NULL, stdout, stdin);
    if (!screen) {
        const char *term = getenv("TERM");
        snprintf(why, cap, "cannot drive terminal type '%s'", term ? term : "(unset)");
        return false;
    }
    set_term(screen);
    active = true;
    ascii_only = !terminal_is_utf8();
    static bool registered;
    if (!registered) {   /* an exit() from anywhere still gives the terminal back */
        atexit(ui_curses_stop);
        registered = true;
    }
    emergency_len = 0;
    add_cap("sgr0");
    add_cap("cnorm");
    add_cap("rmkx");
    add_cap("rmcup");
    if (emergency_len + sizeof PASTE_OFF < sizeof emergency_seq) {
        memcpy(emergency_seq + emergency_len, PASTE_OFF, sizeof PASTE_OFF - 1);
        emergency_len += sizeof PASTE_OFF - 1;
    }
    /* cbreak, not raw: Ctrl-C stays a signal, so it stops a long prefill too (the session checks
     * the flag between chunks); flow control is turned off so Ctrl-S/Ctrl-Q do not freeze. */
    cbreak();
    struct termios tio;
    if (tcgetattr(STDIN_FILENO, &tio) == 0) {
        tio.c_iflag &= ~(tcflag_t)IXON;
        tcsetattr(STDIN_FILENO, TCSANOW, &tio);
        def_prog_mode();
    }
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    set_escdelay(25);
    setup_styles();
    define_key("\033[200~", KC_PASTE_BEGIN);
    define_key("\033[201~", KC_PASTE_END);
    fputs(PASTE_ON, stdout);
    fflush(stdout);
    return true;
}

void ui_curses_stop(void)
{
    if (!active)
        return;
    active = false;
    endwin();
    fputs(PASTE_OFF, stdout);
    fflush(stdout);
    if (screen) {
        delscreen(screen);
        screen = NULL;
    }
    if (have_saved_termios)
        tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
}

void ui_curses_force_redraw(void)
{
    if (active)
        clearok(curscr, TRUE);
}

bool ui_curses_active(void)
{
    return active;
}

void ui_curses_emergency_restore(void)
{
    if (!active)
        return;
    if (have_saved_termios)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_termios);
    if (emergency_len) {
        ssize_t r = write(STDOUT_FILENO, emergency_seq, emergency_len);
        (void)r;
    }
}

void ui_curses_size(int *rows, int *cols)
{
    *rows = active ? LINES : 0;
    *cols = active ? COLS : 0;
}

/* ---------------------------------------------------------------------------------------------
 * Output */

void ui_curses_present(const ui_grid *g)
{
    if (!active)
        return;
    int rows = g->rows < LINES ? g->rows : LINES;
    int cols = g->cols < COLS ? g->cols : COLS;
    for (int y = 0; y < rows; y++) {
        for (int x = 0; x < cols; x++) {
            const ui_cell *c = ui_grid_cell(g, y, x);
            if (c->width == 0)
                continue;
            uint8_t st = c->style < UI_STYLE_COUNT ? c->style : UI_STYLE_NORMAL;
            attr_t a = style_attr[st];
            if (c->attr & UI_ATTR_BOLD)
                a |= A_BOLD;
            if (c->attr & UI_ATTR_UNDERLINE)
                a |= A_UNDERLINE;
            if (c->attr & UI_ATTR_REVERSE)
                a |= A_REVERSE;
            if (c->attr & UI_ATTR_DIM)
                a |= A_DIM;
            wchar_t wc[3] = {(wchar_t)c->cp, (wchar_t)c->mark, 0};
            if (c->width == 2 && x + 1 >= cols)
                wc[0] = L' ', wc[1] = 0;
            cchar_t cc;
            if (ascii_only) {
                /* One ASCII character per cell; a wide character's second cell is a blank. */
                wc[0] = (wchar_t)ui_ascii_fallback((uint32_t)wc[0]);
                wc[1] = 0;
                if (c->width == 2 && x + 1 < cols) {
                    wchar_t blank[2] = {L' ', 0};
                    setcchar(&cc, blank, a, style_pair[st], NULL);
                    mvadd_wch(y, x + 1, &cc);
                }
            }
            setcchar(&cc, wc, a, style_pair[st], NULL);
            mvadd_wch(y, x, &cc);
        }
    }
    if (g->cursor_visible && g->cursor_y < LINES && g->cursor_x < COLS) {
        curs_set(1);
        move(g->cursor_y, g->cursor_x);
    } else {
        curs_set(0);
    }
    wnoutrefresh(stdscr);
    doupdate();
}

/* ---------------------------------------------------------------------------------------------
 * Input */

/* Whether the terminal's input hung up (its window closed, the tmux server killed): reads then
 * fail at once, so the key loop would spin. Only the session leader gets SIGHUP (under `make
 * run`, make), so the REPL must notice it itself. Looked at most every 100 ms: one poll. */
static bool input_hung_up(void)
{
    static double last_ms;
    double now = tt_now_ms();
    if (now - last_ms < 100)
        return false;
    last_ms = now;
    struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
    return poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLERR | POLLNVAL));
}

ui_key ui_curses_read_key(int timeout_ms)
{
    ui_key k = {UI_KEY_NONE, 0};
    if (!active)
        return k;
    timeout(timeout_ms);
    wint_t wc;
    int r = get_wch(&wc);
    if (r == ERR) {
        if (input_hung_up())
            k.type = UI_KEY_HANGUP;
        return k;
    }
    if (r == KEY_CODE_YES) {
        switch (wc) {
        case KEY_LEFT: k.type = UI_KEY_LEFT; break;
        case KEY_RIGHT: k.type = UI_KEY_RIGHT; break;
        case KEY_UP: k.type = UI_KEY_UP; break;
        case KEY_DOWN: k.type = UI_KEY_DOWN; break;
        case KEY_HOME: k.type = UI_KEY_HOME; break;
        case KEY_END: k.type = UI_KEY_END; break;
        case KEY_PPAGE: k.type = UI_KEY_PAGE_UP; break;
        case KEY_NPAGE: k.type = UI_KEY_PAGE_DOWN; break;
        case KEY_BACKSPACE: k.type = UI_KEY_BACKSPACE; break;
        case KEY_DC: k.type = UI_KEY_DELETE; break;
        case KEY_ENTER: k.type = UI_KEY_ENTER; break;
        case KEY_RESIZE: k.type = UI_KEY_RESIZE; break;
        case KC_PASTE_BEGIN: k.type = UI_KEY_PASTE_BEGIN; break;
        case KC_PASTE_END: k.type = UI_KEY_PASTE_END; break;
        default: k.type = UI_KEY_OTHER; break;
        }
        return k;
    }
    if (wc == '\r' || wc == '\n')
        k.type = UI_KEY_ENTER;
    else if (wc == '\t')
        k.type = UI_KEY_TAB;
    else if (wc == 27)
        k.type = UI_KEY_ESC;
    else if (wc == 127 || wc == 8)
        k.type = UI_KEY_BACKSPACE;
    else if (wc < 32) {
        k.type = UI_KEY_CTRL;
        k.cp = 'a' + wc - 1;
    } else {
        k.type = UI_KEY_CHAR;
        k.cp = (uint32_t)wc;
    }
    return k;
}
