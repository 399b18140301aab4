/* jsoncheck.c: test helper: checks that every line of stdin is one JSON object, optionally that
 * the last line has the given keys, and prints the value of --get KEY from the last line. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
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
            fprintf(stderr, "usage: jsoncheck [--has KEY] [--get KEY] < lines\n");
            return 2;
        }
    }
    if (argc == 1)
        printf("%d lines\n", lineno);
    cJSON_Delete(last);
    return 0;
}
