/* main.c: tokentop's entry point: argument parsing and subcommands. */
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argc; (void)argv;
    fprintf(stderr, "tokentop: not built yet\n");
    return 1;
}
