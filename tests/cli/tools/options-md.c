/*
 * options-md plan|mount: print an option table as the rows of a Markdown
 * table, as docs/plan.md and docs/view.md show them; tests/cli/test_tools.sh
 * checks that the docs hold exactly these rows.
 */
#include <stdio.h>
#include <string.h>

#include "shardfs/options.h"

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "plan"))
		sfs_opt_markdown(sfs_plan_options, stdout);
	else if (argc == 2 && !strcmp(argv[1], "mount"))
		sfs_opt_markdown(sfs_mount_options, stdout);
	else {
		fprintf(stderr, "usage: options-md plan|mount\n");
		return 2;
	}
	return 0;
}
