/* SPDX-License-Identifier: MIT */
/* The configuration file (see config.h), parsed with inih. */
#include "config.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct parse_state {
	struct gw_config *c;
	FILE *f;
	int line;       /* the line inih is looking at (counted by the reader) */
	int err_line;   /* first error found by the handler, 0 if none */
	char err[256];
};

static int fail(struct parse_state *p, const char *fmt, const char *a, const char *b)
{
	if (!p->err_line) {
		p->err_line = p->line;
		snprintf(p->err, sizeof(p->err), fmt, a, b);
	}
	return 0;
}

static bool good_section_name(const char *s);

/* A "[name]" line: a new target, unless the name is bad or taken (errors at this line). */
static void section_header(struct parse_state *p, const char *line)
{
	struct gw_config *c = p->c;
	char name[128];
	const char *end = strchr(line, ']');
	if (!end || (size_t)(end - line - 1) >= sizeof(name))
		return; /* inih reports the syntax error */
	memcpy(name, line + 1, (size_t)(end - line - 1));
	name[end - line - 1] = '\0';
	if (!good_section_name(name)) {
		fail(p, "bad section name [%s]: letters, digits, '_', '-' and '.' expected%s", name, "");
		return;
	}
	if (gw_config_find(c, name)) {
		fail(p, "section [%s] appears twice%s", name, "");
		return;
	}
	struct gw_config_target *n = realloc(c->targets, (c->ntargets + 1) * sizeof(*n));
	if (!n) {
		fail(p, "out of memory%s%s", "", "");
		return;
	}
	c->targets = n;
	memset(&n[c->ntargets], 0, sizeof(*n));
	n[c->ntargets].name = strdup(name);
	n[c->ntargets].line = p->line;
	if (n[c->ntargets].name)
		c->ntargets++;
}

/* fgets that counts lines (so that errors know where they are) and sees section headers. */
static char *counting_reader(char *str, int num, void *stream)
{
	struct parse_state *p = stream;
	char *r = fgets(str, num, p->f);
	if (r) {
		p->line++;
		const char *q = r + strspn(r, " \t");
		if (*q == '[')
			section_header(p, q);
	}
	return r;
}

static bool good_section_name(const char *s)
{
	if (!*s || strlen(s) > 64 || s[0] == '-' || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

static int set_once(struct parse_state *p, char **field, int *line, const char *section, const char *key,
		    const char *value)
{
	if (*field)
		return fail(p, "key '%s' given twice in %s", key, section[0] ? section : "the global part");
	if (!*value && (!strcmp(key, "secret_file") || !strcmp(key, "mountpoint")))
		return fail(p, "key '%s' is empty: a path expected%s", key, "");
	*line = p->line;
	*field = strdup(value);
	if (!*field)
		return fail(p, "out of memory%s%s", "", "");
	if (!strcmp(key, "options")) {
		/* "ro, queue_depth=64": blanks around the commas mean nothing */
		char *w = *field;
		for (const char *r = *field; *r; r++)
			if (*r != ' ' && *r != '\t')
				*w++ = *r;
		*w = '\0';
	}
	return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse_state *p = user;
	struct gw_config *c = p->c;

	if (!section[0]) {
		if (!strcmp(name, "initiator_name"))
			return set_once(p, &c->initiator_name, &c->initiator_name_line, section, name, value);
		if (!strcmp(name, "options"))
			return set_once(p, &c->options, &c->options_line, section, name, value);
		return fail(p, "unknown key '%s'%s (global keys: initiator_name, options)", name, "");
	}
	struct gw_config_target *t = c->ntargets ? &c->targets[c->ntargets - 1] : NULL;
	if (!t || strcmp(t->name, section) != 0)
		return 0; /* a bad or repeated section: already reported by section_header */
	if (!strcmp(name, "url"))
		return set_once(p, &t->url, &t->url_line, section, name, value);
	if (!strcmp(name, "secret_file"))
		return set_once(p, &t->secret_file, &t->secret_file_line, section, name, value);
	if (!strcmp(name, "mountpoint"))
		return set_once(p, &t->mountpoint, &t->mountpoint_line, section, name, value);
	if (!strcmp(name, "options"))
		return set_once(p, &t->options, &t->options_line, section, name, value);
	return fail(p, "unknown key '%s' in section [%s] (keys: url, secret_file, mountpoint, options)", name,
		    section);
}

int gw_config_load(const char *path, bool must_exist, struct gw_config *c)
{
	struct parse_state p = {.c = c};

	memset(c, 0, sizeof(*c));
	p.f = fopen(path, "r");
	if (!p.f) {
		if ((errno == ENOENT || errno == EACCES) && !must_exist)
			return 0; /* the system default, absent or not for this user */
		fprintf(stderr, "iserfuse: %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fileno(p.f), &st) == 0 && !S_ISREG(st.st_mode)) {
		fprintf(stderr, "iserfuse: %s: %s\n", path, S_ISDIR(st.st_mode) ? strerror(EISDIR) : "not a regular file");
		fclose(p.f);
		return -1;
	}
	c->path = strdup(path);
	int rc = ini_parse_stream(counting_reader, &p, handler, &p);
	fclose(p.f);
	if (rc < 0) {
		fprintf(stderr, "iserfuse: %s: cannot read it\n", path);
		goto fail;
	}
	/* The first error wins: one of ours (p.err_line) or inih's syntax error (rc > 0). */
	if (p.err_line && (rc <= 0 || p.err_line <= rc)) {
		fprintf(stderr, "iserfuse: %s:%d: %s\n", path, p.err_line, p.err);
		goto fail;
	}
	if (rc > 0) {
		fprintf(stderr, "iserfuse: %s:%d: syntax error: 'key = value', '[section]' or a comment expected\n",
			path, rc);
		goto fail;
	}
	for (size_t i = 0; i < c->ntargets; i++) {
		if (!c->targets[i].url) {
			fprintf(stderr, "iserfuse: %s:%d: section [%s] has no url\n", path, c->targets[i].line,
				c->targets[i].name);
			goto fail;
		}
	}
	return 0;
fail:
	gw_config_free(c);
	return -1;
}

const struct gw_config_target *gw_config_find(const struct gw_config *c, const char *name)
{
	for (size_t i = 0; i < c->ntargets; i++)
		if (!strcmp(c->targets[i].name, name))
			return &c->targets[i];
	return NULL;
}

static void free_wiped(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s)); /* a url may carry a password */
	free(s);
}

void gw_config_free(struct gw_config *c)
{
	for (size_t i = 0; i < c->ntargets; i++) {
		struct gw_config_target *t = &c->targets[i];
		free(t->name);
		free_wiped(t->url);
		free(t->secret_file);
		free(t->mountpoint);
		free(t->options);
	}
	free(c->targets);
	free(c->path);
	free(c->initiator_name);
	free(c->options);
	memset(c, 0, sizeof(*c));
}
