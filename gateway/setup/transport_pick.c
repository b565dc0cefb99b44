/* SPDX-License-Identifier: MIT */
/*
 * Which transport a mount uses (-o transport=auto|iser|tcp, ?iser): for
 * auto, the kernel's route to the portal (RTM_GETROUTE, initiator/
 * netroute.c), its output network device (for a local portal the device
 * holding the source address), and whether an RDMA device is bound to it
 * (/sys/class/infiniband/<dev>/ports/<n>/gid_attrs/ndevs/); then iSER is tried and TCP taken when the RDMA CM cannot reach
 * the portal.  The choice and its reason are logged.  RLIMIT_MEMLOCK is
 * checked against the pool before anything connects.
 */
#include "transport_pick.h"

#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "initiator/iser/iser.h"
#include "initiator/util/log.h"
#include "initiator/net/netroute.h"

int gw_transport_parse(const char *word, bool url_iser, enum gw_transport *out)
{
	if (!word) {
		*out = url_iser ? GW_TRANSPORT_ISER : GW_TRANSPORT_AUTO;
		return 0;
	}
	if (strcmp(word, "auto") == 0)
		*out = GW_TRANSPORT_AUTO;
	else if (strcmp(word, "iser") == 0)
		*out = GW_TRANSPORT_ISER;
	else if (strcmp(word, "tcp") == 0)
		*out = GW_TRANSPORT_TCP;
	else
		return -EINVAL;
	if (url_iser && *out == GW_TRANSPORT_TCP)
		return -EINVAL; /* ?iser and transport=tcp contradict each other */
	if (url_iser)
		*out = GW_TRANSPORT_ISER;
	return 0;
}

/* Whether the interface address a equals the address in ss (same family). */
static bool same_addr(const struct sockaddr *a, const struct sockaddr_storage *ss)
{
	if (a->sa_family != ss->ss_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)ss)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)ss)->sin6_addr,
		      16) == 0;
}

/*
 * The network device the kernel routes host:port through, into dev
 * (IFNAMSIZ): the route's output interface (iscsi_route_lookup), except
 * for a local route (a portal on this host), whose output interface is
 * lo: there the device holding the route's source address, where an RDMA
 * device (soft-RoCE) may be bound.  0 or -errno.
 */
static int route_netdev(const char *host, unsigned port, char *dev, size_t cap)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
	char service[16];
	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(host, service, &hints, &ai))
		return -EHOSTUNREACH;
	struct iscsi_route r;
	int rc = iscsi_route_lookup(ai->ai_addr, &r);
	freeaddrinfo(ai);
	if (rc)
		return rc;
	if (!r.local || !r.have_src) {
		snprintf(dev, cap, "%s", r.ifname);
		return 0;
	}
	struct ifaddrs *ifs, *i;
	if (getifaddrs(&ifs))
		return -errno;
	rc = -ENODEV;
	for (i = ifs; i; i = i->ifa_next) {
		if (i->ifa_addr && same_addr(i->ifa_addr, &r.src)) {
			snprintf(dev, cap, "%s", i->ifa_name);
			rc = 0;
			break;
		}
	}
	freeifaddrs(ifs);
	return rc;
}

/* An RDMA device bound to netdev (its name into rdev), from sysfs.  true if found. */
static bool rdma_on_netdev(const char *netdev, char *rdev, size_t cap)
{
	DIR *d = opendir("/sys/class/infiniband");
	if (!d)
		return false;
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		for (int port = 1; port <= 4 && !found; port++) {
			for (int gid = 0; gid < 16 && !found; gid++) {
				char path[512], name[IFNAMSIZ + 2] = "";
				snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d", e->d_name,
					 port, gid);
				FILE *f = fopen(path, "r");
				if (!f)
					continue;
				if (fgets(name, sizeof(name), f)) {
					name[strcspn(name, "\n")] = '\0';
					if (strcmp(name, netdev) == 0) {
						snprintf(rdev, cap, "%s", e->d_name);
						found = true;
					}
				}
				fclose(f);
			}
		}
	}
	closedir(d);
	return found;
}

/* RLIMIT_MEMLOCK room for `bytes` (root with CAP_IPC_LOCK is not limited): 0, or -ENOMEM with a line in err. */
static int memlock_ok(size_t bytes, char *err, size_t cap)
{
	struct rlimit rl;
	if (geteuid() == 0 || getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= bytes)
		return 0;
	snprintf(err, cap,
		 "iSER needs %zu KiB of locked memory for the buffer pool, RLIMIT_MEMLOCK allows %llu KiB: raise it "
		 "(ulimit -l %zu, LimitMEMLOCK= in systemd, memlock in limits.conf) or lower -o queue_depth/max_io_kib",
		 (bytes + 1023) / 1024, (unsigned long long)rl.rlim_cur / 1024, (bytes + 1023) / 1024);
	return -ENOMEM;
}

/* Per-connection registered buffers of the iSER transport, an upper estimate (bytes). */
static size_t iser_conn_bytes(unsigned qd)
{
	return (size_t)(4 * qd + 48) * 9400 + 256 * 1024;
}

static void note_registration(void *arg)
{
	buf_pool_note_registration(arg);
}

int gw_session_open(enum gw_transport mode, struct iscsi_session_config *sc, struct buf_pool *pool,
		    struct iser_ctx **ctx, struct iscsi_session **s, char *err, size_t err_cap)
{
	*ctx = NULL;
	const char *why = "transport=iser";
	if (mode == GW_TRANSPORT_AUTO) {
		char netdev[IFNAMSIZ] = "", rdev[256] = "";
		int rc = route_netdev(sc->host, sc->port, netdev, sizeof(netdev));
		if (rc) {
			log_info("transport: TCP (no route to %s: %s)", sc->host, strerror(-rc));
			mode = GW_TRANSPORT_TCP;
		} else if (!rdma_on_netdev(netdev, rdev, sizeof(rdev))) {
			log_info("transport: TCP (no RDMA device on %s, the route to %s)", netdev, sc->host);
			mode = GW_TRANSPORT_TCP;
		} else {
			static char reason[1024];
			snprintf(reason, sizeof(reason), "RDMA device %s on %s, the route to %s", rdev, netdev, sc->host);
			why = reason;
		}
	}
	if (mode != GW_TRANSPORT_TCP) {
		size_t need = (pool ? buf_pool_len(pool) : 0) + iser_conn_bytes(sc->queue_depth);
		int rc = memlock_ok(need, err, err_cap);
		if (rc && mode == GW_TRANSPORT_ISER)
			return rc;
		if (rc) {
			log_warn("transport: TCP (%s)", err);
			err[0] = '\0';
			mode = GW_TRANSPORT_TCP;
		}
	}
	if (mode != GW_TRANSPORT_TCP) {
		int rc = iser_ctx_create(ctx, pool ? buf_pool_base(pool) : NULL, pool ? buf_pool_len(pool) : 0,
					 sc->queue_depth, pool ? note_registration : NULL, pool);
		if (rc) {
			snprintf(err, err_cap, "out of memory");
			return rc;
		}
		struct iscsi_session_config ic = *sc;
		ic.transport = &iscsi_iser_transport;
		ic.transport_ctx = *ctx;
		iser_neg_config(&ic.neg);
		rc = iscsi_session_open(&ic, s, err, err_cap);
		explicit_bzero(&ic, sizeof(ic));
		if (rc == 0) {
			/* auto: always say what was chosen (the default level shows warnings only) */
			if (mode == GW_TRANSPORT_AUTO)
				log_warn("transport: iSER (%s)", why);
			else
				log_info("transport: iSER (%s)", why);
			return 0;
		}
		iser_ctx_destroy(*ctx);
		*ctx = NULL;
		if (mode == GW_TRANSPORT_ISER)
			return rc;
		log_warn("transport: TCP (iSER failed: %s)", err);
		err[0] = '\0';
	}
	sc->transport = &iscsi_tcp_transport;
	sc->transport_ctx = NULL;
	return iscsi_session_open(sc, s, err, err_cap);
}
