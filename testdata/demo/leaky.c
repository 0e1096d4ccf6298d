/*
 * leaky.c: the demo for `make demo`. A toy request handler: it parses
 * requests into temporary buffers (freed: churn), keeps a session cache that
 * never evicts (a leak), and forgets to free one header copy per request in
 * an error path (another leak).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct session {
	char *user;
	struct session *next;
};

static struct session *cache;

__attribute__((noipa)) static char *parse_request(int i)
{
	char *buf = malloc(512);
	snprintf(buf, 512, "GET /item/%d HTTP/1.1", i);
	return buf;
}

__attribute__((noipa)) static void remember_session(int i)
{
	struct session *s = malloc(sizeof *s);
	if (asprintf(&s->user, "user-%d", i % 1000) < 0) /* @site remember_session */
		abort();
	s->next = cache;
	cache = s;
}

__attribute__((noipa)) static int check_headers(const char *req)
{
	char *copy = strdup(req); /* @site check_headers */
	if (strstr(copy, "/item/7"))
		return -1; /* the bug: copy is not freed on this path */
	free(copy);
	return 0;
}

int main(void)
{
	for (int i = 0; i < 20000; i++) {
		char *req = parse_request(i);
		check_headers(req);
		if (i % 4 == 0)
			remember_session(i);
		free(req);
	}
	return 0;
}
