/* SPDX-License-Identifier: MIT */
/*
 * CHAP credentials for the gateway (RFC 7143 §12.1.3): gathered from the
 * URL, a secret file and the environment, handed to the session config,
 * wiped.  Nothing here ever prints a secret.
 */
#ifndef ISERFUSE_CREDENTIALS_H
#define ISERFUSE_CREDENTIALS_H

#include "initiator/session/session.h"
#include "initiator/net/url.h"

/*
 * Fill c, field by field, from the first source that has the field:
 *   1. the URL: user%password@, ?target_user=, ?target_password=;
 *   2. secret_file (may be NULL): "key = value" lines, keys username,
 *      password, mutual_username, mutual_password, '#' comments; the file
 *      must be a regular file owned by the caller (getuid) with no group or
 *      other permission bits;
 *   3. the environment: ISERFUSE_CHAP_USERNAME, ISERFUSE_CHAP_PASSWORD,
 *      ISERFUSE_CHAP_MUTUAL_USERNAME, ISERFUSE_CHAP_MUTUAL_PASSWORD (these
 *      are removed from the environment once read, so that no child
 *      process inherits them).
 * A user name needs a secret and the other way round, in each direction;
 * mutual credentials need our own too.  Prints a one-line warning on
 * stderr when the URL carries a password (argv is visible to other users).
 * Returns 0, or -1 after printing one line "iserfuse: ..." on stderr (no
 * secret in it; c is wiped then); a line about the secret file starts
 * with where ("PATH:LINE: " of the configuration file's secret_file =,
 * "" or NULL when it came from the command line).
 */
int gw_creds_load(struct iscsi_chap_creds *c, const struct iscsi_url *url, const char *secret_file, const char *where);

/* Copy c into the session config's CHAP credentials, then wipe c. */
void gw_creds_to_session(struct iscsi_chap_creds *c, struct iscsi_session_config *sc);

/*
 * Overwrite, with 'x', the passwords inside every iscsi:// argument of
 * argv (user%password@ and target_password=), so that ps(1) and
 * /proc/PID/cmdline stop showing them.
 */
void gw_creds_scrub_argv(int argc, char **argv);

#endif
