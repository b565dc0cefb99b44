/* SPDX-License-Identifier: MIT */
/*
 * iserfuse --version: our version, the libfuse we run on (and were built
 * against), and the rdma-core libibverbs seen at build time (pkg-config)
 * and at run time (the library file the dynamic linker finds).
 */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gateway.h"

#ifndef ISERFUSE_VERSION
#define ISERFUSE_VERSION "0.1.0"
#endif
#ifndef ISERFUSE_IBVERBS_VERSION
#define ISERFUSE_IBVERBS_VERSION "unknown"
#endif

/* libibverbs versions its file as 1.<provider ABI>.<rdma-core major>.<minor>: "1.14.44.0" -> "44.0". */
static const char *rdma_core_of(const char *libver)
{
	const char *p = libver;
	for (int dots = 0; dots < 2; dots++) {
		p = strchr(p, '.');
		if (!p)
			return NULL;
		p++;
	}
	return *p ? p : NULL;
}

/* The version suffix of the libibverbs.so.1 the dynamic linker loads, into out; "" if none. */
static void runtime_ibverbs(char *out, size_t cap)
{
	out[0] = '\0';
	void *h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return;
	struct link_map *lm = NULL;
	char real[PATH_MAX];
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && realpath(lm->l_name, real)) {
		const char *so = strstr(real, ".so.");
		if (so)
			snprintf(out, cap, "%s", so + 4);
	}
	dlclose(h);
}

void gw_print_version(FILE *f)
{
	char rt[64];
	const char *core;

	fprintf(f, "iserfuse %s\n", ISERFUSE_VERSION);
	fprintf(f, "libfuse %s (built against %d.%d)\n", fuse_pkgversion(), FUSE_MAJOR_VERSION, FUSE_MINOR_VERSION);
	core = rdma_core_of(ISERFUSE_IBVERBS_VERSION);
	fprintf(f, "libibverbs %s at build time (rdma-core %s)\n", ISERFUSE_IBVERBS_VERSION, core ? core : "unknown");
	runtime_ibverbs(rt, sizeof(rt));
	if (rt[0]) {
		core = rdma_core_of(rt);
		fprintf(f, "libibverbs %s at run time (rdma-core %s)\n", rt, core ? core : "unknown");
	} else {
		fprintf(f, "libibverbs not found at run time (iSER unavailable)\n");
	}
}
