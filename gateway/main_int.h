/* main_int.h — what the files of the facetfs command line share: main.c
 * (the entry point, mount, check, advise, replay) calls main_ctl.c (the
 * commands that talk to a running mount through its .facetfs/ files),
 * never the reverse; the two helpers below serve both. Each command takes
 * its argv after the command's name and returns the exit status (2: a
 * usage error, its usage on stderr). */
#ifndef FACETFS_GATEWAY_MAIN_INT_H
#define FACETFS_GATEWAY_MAIN_INT_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static inline bool is_help(const char *a)
{
	return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* A subcommand's usage on stderr after a usage error; exit status 2. */
static inline int usage_of(const char *text)
{
	fputs(text, stderr);
	return 2;
}

int cmd_status(int argc, char **argv);
int cmd_rescan(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_sync(int argc, char **argv);
int cmd_wait(int argc, char **argv);

#endif
