/* SPDX-License-Identifier: MIT */
/*
 * ALUA (SPC-4 §5.15): state names and ranks, REPORT TARGET PORT GROUPS
 * parameter data, the port designators of VPD 0x83, sense classes.  Pure
 * (see alua.h); the command itself is in alua_query.c.
 */
#include "alua.h"

#include <errno.h>
#include <string.h>

#include "initiator/util/be.h"

const char *alua_state_name(int state)
{
	switch (state) {
	case ALUA_ACTIVE_OPTIMIZED:
		return "active/optimized";
	case ALUA_ACTIVE_NON_OPTIMIZED:
		return "active/non-optimized";
	case ALUA_STANDBY:
		return "standby";
	case ALUA_UNAVAILABLE:
		return "unavailable";
	case ALUA_LBA_DEPENDENT:
		return "lba-dependent";
	case ALUA_OFFLINE:
		return "offline";
	case ALUA_TRANSITIONING:
		return "transitioning";
	case ALUA_NONE:
		return "none";
	default:
		return "reserved";
	}
}

bool alua_state_usable(int state)
{
	return state == ALUA_ACTIVE_OPTIMIZED || state == ALUA_ACTIVE_NON_OPTIMIZED || state == ALUA_LBA_DEPENDENT ||
	       state == ALUA_NONE;
}

int alua_state_rank(int state)
{
	switch (state) {
	case ALUA_ACTIVE_OPTIMIZED:
	case ALUA_NONE:
		return 0;
	case ALUA_ACTIVE_NON_OPTIMIZED:
	case ALUA_LBA_DEPENDENT:
		return 1;
	default:
		return 9;
	}
}

/*
 * RETURN DATA LENGTH (bytes 0-3) counts the bytes after byte 3, so the
 * data ends at 4 + RETURN DATA LENGTH; the extended header's FORMAT TYPE
 * (byte 4 bits 6-4, 001b) and IMPLICIT TRANSITION TIME (byte 5) are part
 * of it.  In the length-only format byte 4 is the first descriptor's PREF
 * / ASYMMETRIC ACCESS STATE byte, whose bits 6-4 are reserved (zero).
 * Each target port group descriptor is 8 bytes plus 4 per target port
 * (bytes 2-3 of a target port descriptor: RELATIVE TARGET PORT
 * IDENTIFIER).
 */
int alua_parse_rtpg(const uint8_t *buf, size_t len, struct alua_tpg *out, size_t max, size_t *count,
		    uint8_t *implicit_transition_time_s)
{
	size_t end, avail, off = 4, c = 0;

	if (!count)
		return -EPROTO;
	*count = 0;
	if (implicit_transition_time_s)
		*implicit_transition_time_s = 0;
	if (!buf || len < 4)
		return -EPROTO;
	end = 4 + (size_t)get_be32(buf); /* no wrap: at most 4 + 0xffffffff */
	/*
	 * With the extended header, RETURN DATA LENGTH counts its bytes 4-7
	 * (SPC-4 §6.36.2), but LIO leaves them out: a descriptor may end up to
	 * 4 bytes past 4 + RETURN DATA LENGTH.  None may start there.
	 */
	size_t limit = end;
	if (len > 4 && ((buf[4] >> 4) & 0x07) == 0x01) {
		if (end < 8)
			return -EPROTO;
		if (len >= 6 && implicit_transition_time_s)
			*implicit_transition_time_s = buf[5];
		off = 8;
		limit = end + 4;
	}
	avail = len < limit ? len : limit;
	while (off < limit) {
		size_t dlen;

		if (off >= end && (avail <= off || avail - off < 8))
			break;              /* the 4 bytes an extended header may add: no descriptor starts there */
		if (limit - off < 8)
			return -EPROTO;     /* a descriptor header running past the data */
		if (avail < off + 8)
			break;              /* cut short by the allocation length */
		dlen = 8 + 4 * (size_t)buf[off + 7];
		if (limit - off < dlen)
			return -EPROTO;
		/*
		 * Cut short: by the allocation length (a descriptor inside the
		 * RETURN DATA LENGTH: not decoded), or, for one reaching into the
		 * extended header's 4 bytes, by LIO's transfer length, which is
		 * RETURN DATA LENGTH + 4: its header (the state) is kept, with the
		 * port descriptors that came.
		 */
		bool cut = avail - off < dlen;
		if (cut && off + dlen <= end)
			break;
		if (out && c < max) {
			const uint8_t *d = buf + off;
			struct alua_tpg *t = &out[c++];

			memset(t, 0, sizeof(*t));
			t->pref = (d[0] & 0x80) != 0;
			t->state = d[0] & 0x0f;
			t->supported = d[1];
			t->tpg = get_be16(d + 2);
			t->status_code = d[5];
			t->nports = d[7];
			size_t came = (avail - off - 8) / 4;
			for (size_t i = 0; i < t->nports && i < ALUA_TPG_PORTS_MAX && i < came; i++)
				t->ports[i] = get_be16(d + 8 + 4 * i + 2);
		}
		if (cut)
			break;
		off += dlen;
	}
	*count = c;
	return 0;
}

int alua_port_ids(const struct scsi_designator *d, size_t n, uint16_t *tpg, uint16_t *rel_port)
{
	bool have_tpg = false;
	uint16_t t = 0, p = 0;

	if (!d)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		if (d[i].association != 1 || d[i].len < 4)
			continue;
		/* 4-byte ids: bytes 0-1 reserved, bytes 2-3 the value (SPC-4 §7.8.6.6, §7.8.6.7) */
		if (d[i].type == SCSI_DESIG_TPG && !have_tpg) {
			t = get_be16(d[i].id + 2);
			have_tpg = true;
		} else if (d[i].type == SCSI_DESIG_RELATIVE_PORT && p == 0) {
			p = get_be16(d[i].id + 2);
		}
	}
	if (!have_tpg)
		return -ENOENT;
	if (tpg)
		*tpg = t;
	if (rel_port)
		*rel_port = p;
	return 0;
}

enum alua_sense_class alua_classify_sense(const struct scsi_sense *s)
{
	if (!s)
		return ALUA_SENSE_OTHER;
	if (s->key == SCSI_SK_NOT_READY && s->asc == 0x04) {
		switch (s->ascq) {
		case 0x0a: /* LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE TRANSITION */
			return ALUA_SENSE_TRANSITIONING;
		case 0x0b: /* LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE */
		case 0x0c: /* LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE */
			return ALUA_SENSE_PATH;
		default:
			return ALUA_SENSE_OTHER;
		}
	}
	/* 2Ah/06h ASYMMETRIC ACCESS STATE CHANGED, 2Ah/07h IMPLICIT ASYMMETRIC ACCESS STATE TRANSITION FAILED */
	if (s->key == SCSI_SK_UNIT_ATTENTION && s->asc == 0x2a && (s->ascq == 0x06 || s->ascq == 0x07))
		return ALUA_SENSE_CHANGED;
	return ALUA_SENSE_OTHER;
}
