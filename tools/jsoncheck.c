/* jsoncheck.c: test helper: checks that every line of stdin is one JSON object, optionally that
 * the last line has the given keys, and prints the value of --get KEY from the last line.
 * --attention: every token record (a line with a numeric "id") also carries a valid attention
 * list (generate --json --attention): "attention" or "attention_layers" (a list of such lists),
 * each entry {"pos": P, "token": T, "w": W} with P >= 0, 0 < W <= 1, weights best first summing
 * to at most 1. */
#include <cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One attention list; returns false with a message. */
static bool attention_list(const cJSON *list, int lineno)
{
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) < 1) {
        fprintf(stderr, "jsoncheck: line %d: an attention list is not a non-empty array\n", lineno);
        return false;
    }
    double prev = 2, sum = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pos");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "token");
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(e, "w");
        if (!cJSON_IsNumber(p) || p->valuedouble < 0 || !cJSON_IsString(t) || !cJSON_IsNumber(w) ||
            !(w->valuedouble > 0 && w->valuedouble <= 1 && w->valuedouble <= prev)) {
            fprintf(stderr, "jsoncheck: line %d: bad attention entry (pos >= 0, token, 0 < w <= 1, "
                    "best first)\n", lineno);
            return false;
        }
        prev = w->valuedouble;
        sum += w->valuedouble;
    }
    if (sum > 1.0001) {
        fprintf(stderr, "jsoncheck: line %d: attention weights sum to %g > 1\n", lineno, sum);
        return false;
    }
    return true;
}

static bool attention_record(const cJSON *j, int lineno)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (!cJSON_IsNumber(id))
        return true;                 /* the summary, a flush */
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "attention");
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(j, "attention_layers");
    if (a)
        return attention_list(a, lineno);
    if (!cJSON_IsArray(l) || cJSON_GetArraySize(l) < 1) {
        fprintf(stderr, "jsoncheck: line %d: a token record without attention\n", lineno);
        return false;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, l) {
        if (!attention_list(e, lineno))
            return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    bool attention = argc > 1 && strcmp(argv[1], "--attention") == 0;
    if (attention) {
        argc--;
        argv++;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0;
    cJSON *last = NULL;
    while ((n = getline(&line, &cap, stdin)) != -1) {
        lineno++;
        cJSON *j = cJSON_ParseWithLength(line, (size_t)n);
        if (!j || !cJSON_IsObject(j)) {
            fprintf(stderr, "jsoncheck: line %d is not a JSON object: %.200s\n", lineno, line);
            return 1;
        }
        if (attention && !attention_record(j, lineno))
            return 1;
        cJSON_Delete(last);
        last = j;
    }
    free(line);
    if (!last) {
        fprintf(stderr, "jsoncheck: no JSON lines\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--has") == 0 && i + 1 < argc) {
            if (!cJSON_GetObjectItemCaseSensitive(last, argv[++i])) {
                fprintf(stderr, "jsoncheck: last line lacks \"%s\"\n", argv[i]);
                return 1;
            }
        } else if (strcmp(argv[i], "--get") == 0 && i + 1 < argc) {
            cJSON *v = cJSON_GetObjectItemCaseSensitive(last, argv[++i]);
            if (!v) {
                fprintf(stderr, "jsoncheck: last line lacks \"%s\"\n", argv[i]);
                return 1;
            }
            if (cJSON_IsString(v))
                printf("%s\n", v->valuestring);
            else {
                char *s = cJSON_PrintUnformatted(v);
                printf("%s\n", s);
                free(s);
            }
        } else {
            fprintf(stderr, "usage: jsoncheck [--attention] [--has KEY] [--get KEY] < lines\n");
            return 2;
        }
    }
    if (argc == 1)
        printf("%d lines\n", lineno);
    cJSON_Delete(last);
    return 0;
}
