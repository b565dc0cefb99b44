/* SPDX-License-Identifier: MIT */
/*
 * Asymmetric logical unit access (ALUA, SPC-4 §5.15): what multipath needs
 * to know about a path's target port group (TPG) and its asymmetric access
 * state.
 *
 *   - the TPGS field of standard INQUIRY (scsi_inquiry_tpgs, scsi.h): does
 *     the LU have ALUA at all;
 *   - REPORT TARGET PORT GROUPS (SPC-4 §6.36; the CDB builder
 *     scsi_cdb_report_tpgs is in scsi.h with the others): every TPG, its
 *     state, the states it supports and its relative target port ids;
 *   - the VPD 0x83 designators of association 1 (target port): which TPG
 *     and relative target port this path's I_T nexus goes through;
 *   - the sense data the ALUA states cause, classified into what a path
 *     selector does about them.
 *
 * Pure: no I/O, no allocation, no locks (the commands that ask a target
 * for these data are in initiator/lun/alua_query.h),
 * any thread.  Parsers take the buffer and the number of valid bytes and
 * never read past that; data from the target is untrusted.
 */
#ifndef ISERFUSE_ALUA_H
#define ISERFUSE_ALUA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scsi.h"

struct iscsi_lun_info; /* lun.h */

/* ASYMMETRIC ACCESS STATE (SPC-4 §6.36.2, table "ASYMMETRIC ACCESS STATE field") */
enum alua_state {
	ALUA_ACTIVE_OPTIMIZED = 0,
	ALUA_ACTIVE_NON_OPTIMIZED = 1,
	ALUA_STANDBY = 2,
	ALUA_UNAVAILABLE = 3,
	ALUA_LBA_DEPENDENT = 4,
	ALUA_OFFLINE = 0xe,
	ALUA_TRANSITIONING = 0xf,
	ALUA_NONE = 0x100 /* the LU has no ALUA (TPGS 0) or the state is unknown */
};

/* SUPPORTED bits of a target port group descriptor (byte 1) */
enum {
	ALUA_SUP_AO = 1u << 0,  /* AO_SUP: active/optimized */
	ALUA_SUP_AN = 1u << 1,  /* AN_SUP: active/non-optimized */
	ALUA_SUP_S = 1u << 2,   /* S_SUP: standby */
	ALUA_SUP_U = 1u << 3,   /* U_SUP: unavailable */
	ALUA_SUP_LBD = 1u << 4, /* LBD_SUP: logical block dependent */
	ALUA_SUP_O = 1u << 6,   /* O_SUP: offline */
	ALUA_SUP_T = 1u << 7,   /* T_SUP: transitioning */
};

/* The TPGS field of standard INQUIRY (SPC-4 §6.6.2) */
enum {
	ALUA_TPGS_NONE = 0,     /* no asymmetric access */
	ALUA_TPGS_IMPLICIT = 1, /* the target changes states itself */
	ALUA_TPGS_EXPLICIT = 2, /* SET TARGET PORT GROUPS changes them */
	ALUA_TPGS_BOTH = 3,
};

/* The most relative target port ids kept per target port group descriptor. */
#define ALUA_TPG_PORTS_MAX 16u

/* One target port group descriptor of REPORT TARGET PORT GROUPS (SPC-4 §6.36.2). */
struct alua_tpg {
	uint16_t tpg;           /* TARGET PORT GROUP */
	uint8_t state;          /* enum alua_state, 4 bits as sent */
	bool pref;              /* PREF: a preferred port group */
	uint8_t supported;      /* the T_SUP..AO_SUP bits (ALUA_SUP_*) */
	uint8_t status_code;    /* STATUS CODE: 0 none, 1 changed by SET TARGET PORT GROUPS, 2 implicitly */
	uint16_t nports;        /* TARGET PORT COUNT as sent (0..255) */
	uint16_t ports[ALUA_TPG_PORTS_MAX]; /* relative target port ids, the first min(nports, 16) */
};

/*
 * The state's name: "active/optimized", "active/non-optimized", "standby",
 * "unavailable", "lba-dependent", "offline", "transitioning", "none";
 * "reserved" for any other value.  A static string.
 */
const char *alua_state_name(int state);

/*
 * Whether commands may be sent through a port in this state (SPC-4
 * §5.15.2.4): active/optimized, active/non-optimized, logical block
 * dependent, and ALUA_NONE (no ALUA: the path is as good as any).
 */
bool alua_state_usable(int state);

/*
 * Preference of a state for a path selector, lower is better:
 * active/optimized and ALUA_NONE 0, active/non-optimized and logical
 * block dependent 1, every state that is not usable (standby,
 * unavailable, offline, transitioning, reserved values) 9.
 */
int alua_state_rank(int state);

/*
 * REPORT TARGET PORT GROUPS parameter data (SPC-4 §6.36.2) in buf (len
 * valid bytes), the length-only header (PARAMETER DATA FORMAT 000b: 4
 * bytes) or the extended header (001b: 8 bytes, with the IMPLICIT
 * TRANSITION TIME in seconds), told apart by the FORMAT TYPE in byte 4.
 * Fills out[] with the descriptors in order (up to max), *count = how
 * many; *implicit_transition_time_s (may be NULL) gets the time, 0 for
 * the length-only format.  Data cut short by the allocation length (len
 * less than RETURN DATA LENGTH + 4) is decoded as far as whole descriptors
 * go.  Returns 0, or -EPROTO when fewer than 4 bytes came, the RETURN
 * DATA LENGTH does not cover an extended header, or a descriptor (with its
 * target port descriptors) runs past the RETURN DATA LENGTH.
 */
int alua_parse_rtpg(const uint8_t *buf, size_t len, struct alua_tpg *out, size_t max, size_t *count,
		    uint8_t *implicit_transition_time_s);

/*
 * The TPG and relative target port of this path from VPD 0x83 designators
 * (scsi_parse_vpd_devid, n of them; SPC-4 §7.8.6.6, §7.8.6.7): association
 * 1 (target port), type 5 (target port group: 4-byte id, TARGET PORT
 * GROUP in its low 16 bits) and type 4 (relative target port: 4-byte id,
 * low 16 bits).  *tpg and *rel_port (0 when absent) are set when the TPG
 * designator is found.  Returns 0, or -ENOENT when there is none (tpg and
 * rel_port untouched).
 */
int alua_port_ids(const struct scsi_designator *d, size_t n, uint16_t *tpg, uint16_t *rel_port);

/* What a path selector does about a command's sense data (SPC-4 §5.15.2). */
enum alua_sense_class {
	ALUA_SENSE_OTHER,
	ALUA_SENSE_PATH,          /* this path cannot do it now: try another path */
	ALUA_SENSE_TRANSITIONING, /* retry after a short delay, preferably on another path */
	ALUA_SENSE_CHANGED,       /* the states changed: re-read them; the command may be retried */
};

/*
 * Classify sense data (SPC-4 Annex F ASC/ASCQ assignments):
 *   NOT READY 04h/0Ah  LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE
 *                      TRANSITION                     -> TRANSITIONING
 *   NOT READY 04h/0Bh  LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY
 *                      STATE                          -> PATH
 *   NOT READY 04h/0Ch  LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN
 *                      UNAVAILABLE STATE              -> PATH
 *   UNIT ATTENTION 2Ah/06h  ASYMMETRIC ACCESS STATE CHANGED   -> CHANGED
 *   UNIT ATTENTION 2Ah/07h  IMPLICIT ASYMMETRIC ACCESS STATE TRANSITION
 *                           FAILED                            -> CHANGED
 * anything else, and NULL, -> OTHER.
 */
enum alua_sense_class alua_classify_sense(const struct scsi_sense *s);

#endif
