/* SPDX-License-Identifier: MIT */
/*
 * What initiator/net/netroute.c and netwatch.c see, for tests/recovery/netroute.sh:
 *
 *   netroute_probe route HOST   the route to HOST (numeric IPv4/IPv6) as
 *                               "dev NAME src ADDR [via GW] [local]";
 *                               exit 0, 3 when there is no route (the
 *                               errno's text on stderr), 1 other errors
 *   netroute_probe watch        "ready", then one line per event until
 *                               SIGTERM/SIGINT, then "stopped" and exit 0:
 *                                 link IFINDEX NAME up|down running|stopped NS
 *                                 route add|del DST/LEN oif IFINDEX table T NS
 *                                 overrun NS
 *                               NS: CLOCK_REALTIME when the event was read, ns
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "initiator/net/netroute.h"
#include "initiator/net/netwatch.h"

static long long realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int route(const char *host)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICHOST}, *ai = NULL;
	if (getaddrinfo(host, NULL, &hints, &ai)) {
		fprintf(stderr, "%s: not a numeric address\n", host);
		return 1;
	}
	struct iscsi_route r;
	int rc = iscsi_route_lookup(ai->ai_addr, &r);
	freeaddrinfo(ai);
	if (rc) {
		fprintf(stderr, "%s: %s\n", host, strerror(-rc));
		return rc == -ENETUNREACH ? 3 : 1;
	}
	char line[256];
	iscsi_route_format(&r, line, sizeof(line));
	printf("%s\n", line);
	return 0;
}

static void on_event(void *arg, const struct netwatch_event *ev)
{
	(void)arg;
	long long now = realtime_ns();
	if (ev->kind == NETWATCH_LINK) {
		printf("link %d %s %s %s %lld\n", ev->ifindex, ev->ifname[0] ? ev->ifname : "-",
		       ev->up ? "up" : "down", ev->running ? "running" : "stopped", now);
	} else if (ev->kind == NETWATCH_ROUTE) {
		char dst[INET6_ADDRSTRLEN] = "default";
		const void *a = ev->family == AF_INET ? (const void *)&((const struct sockaddr_in *)&ev->dst)->sin_addr
						      : (const void *)&((const struct sockaddr_in6 *)&ev->dst)->sin6_addr;
		if (ev->dst_len && !inet_ntop(ev->family, a, dst, sizeof(dst)))
			snprintf(dst, sizeof(dst), "?");
		printf("route %s %s/%u oif %d table %u %lld\n", ev->removed ? "del" : "add", dst, ev->dst_len,
		       ev->ifindex, ev->table, now);
	} else {
		printf("overrun %lld\n", now);
	}
	fflush(stdout);
}

static int watch(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	struct netwatch *w;
	int rc = netwatch_start(on_event, NULL, &w);
	if (rc) {
		fprintf(stderr, "netwatch_start: %s\n", strerror(-rc));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	int sig;
	sigwait(&set, &sig);
	netwatch_stop(w);
	printf("stopped\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "route") == 0)
		return route(argv[2]);
	if (argc == 2 && strcmp(argv[1], "watch") == 0)
		return watch();
	fprintf(stderr, "usage: %s route HOST | watch\n", argv[0]);
	return 2;
}
