/* SPDX-License-Identifier: MIT */
/*
 * Preloaded by the suite scripts (tests/lib/suite.sh) into what they start
 * when the build has UBSan beside ASan.  gcc links both runtimes, and
 * libasan's __sanitizer_set_report_path interposes libubsan's, so UBSan
 * never takes the log_path of UBSAN_OPTIONS and its reports go to standard
 * error (a background daemon's is /dev/null).  This gives libubsan's own
 * report path that log_path; ASan's reports keep ASAN_OPTIONS' log_path.
 * Does nothing in a process without libubsan.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

__attribute__((constructor)) static void ubsan_log_path(void)
{
	const char *o = getenv("UBSAN_OPTIONS");
	const char *p = o ? strstr(o, "log_path=") : NULL;
	char path[4096];
	if (!p)
		return;
	p += strlen("log_path=");
	size_t n = strcspn(p, ":");
	if (n == 0 || n >= sizeof(path))
		return;
	memcpy(path, p, n);
	path[n] = '\0';
	void *h = dlopen("libubsan.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return;
	/* through the handle: libubsan's own definition, not the one libasan interposes */
	void (*set_path)(const char *) = (void (*)(const char *))dlsym(h, "__sanitizer_set_report_path");
	if (set_path)
		set_path(path);
	dlclose(h);
}
