/*
 * picture.c: the program behind docs/exports.md's HTML-report screenshots
 * (scripts/screenshots.sh). A toy server over about four seconds: it loads
 * its configuration, serves requests (temporary parse buffers, a cache that
 * grows, a log kept in memory), trims the cache at half time, and serves on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct entry {
	char *key;
	char *value;
	struct entry *next;
};

static struct entry *cache;
static char *log_lines[4096];
static int n_log;
static char *config[8];

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

__attribute__((noipa)) static void load_config(void)
{
	for (int i = 0; i < 8; i++) {
		config[i] = malloc(64 << 10);
		memset(config[i], 'c', 64 << 10);
	}
}

__attribute__((noipa)) static char *parse_request(int i)
{
	char *buf = malloc(2048);
	snprintf(buf, 2048, "GET /item/%d HTTP/1.1", i);
	return buf;
}

__attribute__((noipa)) static struct entry *cache_node(void)
{
	return calloc(1, sizeof(struct entry));
}

__attribute__((noipa)) static char *cache_value(int i)
{
	size_t n = 256 + (i % 7) * 128;
	char *v = malloc(n);
	memset(v, 'v', n);
	return v;
}

__attribute__((noipa)) static void cache_put(const char *req, int i)
{
	struct entry *e = cache_node();
	e->key = strdup(req);
	e->value = cache_value(i);
	e->next = cache;
	cache = e;
}

__attribute__((noipa)) static void log_line(int i)
{
	if (n_log < 4096) {
		log_lines[n_log] = malloc(96);
		snprintf(log_lines[n_log++], 96, "served request %d", i);
	}
}

__attribute__((noipa)) static void handle(int i)
{
	char *req = parse_request(i);
	if (i % 3 == 0)
		cache_put(req, i);
	log_line(i);
	free(req);
}

/* trim frees every other cache entry. */
__attribute__((noipa)) static void trim(void)
{
	for (struct entry *e = cache; e && e->next; e = e->next) {
		struct entry *gone = e->next;
		e->next = gone->next;
		free(gone->key);
		free(gone->value);
		free(gone);
	}
}

__attribute__((noipa)) static void serve(int from, int to)
{
	for (int i = from; i < to; i++) {
		handle(i);
		if (i % 50 == 0)
			pause_ms(20);
	}
}

int main(void)
{
	pause_ms(200);
	load_config();
	pause_ms(300);
	serve(0, 3000);
	trim();
	pause_ms(300);
	serve(3000, 4500);
	pause_ms(300);
	return 0;
}
