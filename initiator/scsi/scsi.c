/* SPDX-License-Identifier: MIT */
/*
 * SCSI CDB builders and response parsers (SPC-4, SBC-3).
 *
 * Everything a target returns is untrusted.  Each parser works on
 * min(len, length the data declares for itself): data cut short by the
 * allocation length is decoded as far as it goes, while a structure that
 * claims to extend past the page (or list, or sense data) holding it is
 * -EPROTO.  Nothing here reads past `len`.
 */
#include "scsi.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "initiator/util/be.h"

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* ---- CDB builders ---- */

static size_t cdb_start(uint8_t cdb[SCSI_CDB_MAX], uint8_t opcode, size_t cdb_len)
{
	memset(cdb, 0, SCSI_CDB_MAX);
	cdb[0] = opcode;
	return cdb_len;
}

size_t scsi_cdb_test_unit_ready(uint8_t cdb[SCSI_CDB_MAX])
{
	return cdb_start(cdb, SCSI_OP_TEST_UNIT_READY, 6);
}

size_t scsi_cdb_inquiry(uint8_t cdb[SCSI_CDB_MAX], bool evpd, uint8_t page, uint16_t alloc_len)
{
	size_t n = cdb_start(cdb, SCSI_OP_INQUIRY, 6);

	/* Without EVPD the PAGE CODE must be zero (SPC-4 §6.6.1). */
	if (evpd) {
		cdb[1] = 0x01;
		cdb[2] = page;
	}
	put_be16(cdb + 3, alloc_len);
	return n;
}

size_t scsi_cdb_report_luns(uint8_t cdb[SCSI_CDB_MAX], uint32_t alloc_len)
{
	size_t n = cdb_start(cdb, SCSI_OP_REPORT_LUNS, 12);

	cdb[2] = 0x00; /* SELECT REPORT: all LUNs but well-known ones */
	put_be32(cdb + 6, alloc_len);
	return n;
}

size_t scsi_cdb_read_capacity10(uint8_t cdb[SCSI_CDB_MAX])
{
	return cdb_start(cdb, SCSI_OP_READ_CAPACITY_10, 10);
}

size_t scsi_cdb_read_capacity16(uint8_t cdb[SCSI_CDB_MAX], uint32_t alloc_len)
{
	size_t n = cdb_start(cdb, SCSI_OP_SERVICE_ACTION_IN_16, 16);

	cdb[1] = 0x10; /* SERVICE ACTION: READ CAPACITY(16) */
	put_be32(cdb + 10, alloc_len);
	return n;
}

/* READ/WRITE(10) or (16); nblocks == 0 is encoded as is (no transfer). */
static size_t cdb_rw(uint8_t cdb[SCSI_CDB_MAX], uint8_t op10, uint8_t op16, uint64_t lba,
		     uint32_t nblocks, bool fua)
{
	size_t n;

	if (lba <= 0xffffffffu && nblocks <= 0xffffu) {
		n = cdb_start(cdb, op10, 10);
		put_be32(cdb + 2, (uint32_t)lba);
		put_be16(cdb + 7, (uint16_t)nblocks);
	} else {
		n = cdb_start(cdb, op16, 16);
		put_be64(cdb + 2, lba);
		put_be32(cdb + 10, nblocks);
	}
	if (fua)
		cdb[1] |= 0x08;
	return n;
}

size_t scsi_cdb_read(uint8_t cdb[SCSI_CDB_MAX], uint64_t lba, uint32_t nblocks, bool fua)
{
	return cdb_rw(cdb, SCSI_OP_READ_10, SCSI_OP_READ_16, lba, nblocks, fua);
}

size_t scsi_cdb_write(uint8_t cdb[SCSI_CDB_MAX], uint64_t lba, uint32_t nblocks, bool fua)
{
	return cdb_rw(cdb, SCSI_OP_WRITE_10, SCSI_OP_WRITE_16, lba, nblocks, fua);
}

/*
 * The 10-byte form cannot carry an LBA above 0xffffffff or more than 0xffff
 * blocks.  Rather than truncating (which would flush the wrong range) the
 * range is widened: a too-large count becomes 0 ("to the end of the
 * medium"), a too-large LBA makes it the whole medium (LBA 0, count 0).
 * Flushing more than asked is always correct.
 */
size_t scsi_cdb_sync_cache(uint8_t cdb[SCSI_CDB_MAX], bool use16, uint64_t lba, uint32_t nblocks)
{
	size_t n;

	if (use16) {
		n = cdb_start(cdb, SCSI_OP_SYNCHRONIZE_CACHE_16, 16);
		put_be64(cdb + 2, lba);
		put_be32(cdb + 10, nblocks);
		return n;
	}
	n = cdb_start(cdb, SCSI_OP_SYNCHRONIZE_CACHE_10, 10);
	if (lba > 0xffffffffu) {
		lba = 0;
		nblocks = 0;
	} else if (nblocks > 0xffffu) {
		nblocks = 0;
	}
	put_be32(cdb + 2, (uint32_t)lba);
	put_be16(cdb + 7, (uint16_t)nblocks);
	return n;
}

size_t scsi_cdb_mode_sense6(uint8_t cdb[SCSI_CDB_MAX], uint8_t page, uint8_t subpage, uint8_t alloc_len)
{
	size_t n = cdb_start(cdb, SCSI_OP_MODE_SENSE_6, 6);

	cdb[1] = 0x08;           /* DBD */
	cdb[2] = page & 0x3f;    /* PC = 00b (current values) */
	cdb[3] = subpage;
	cdb[4] = alloc_len;
	return n;
}

size_t scsi_cdb_mode_sense10(uint8_t cdb[SCSI_CDB_MAX], uint8_t page, uint8_t subpage, uint16_t alloc_len)
{
	size_t n = cdb_start(cdb, SCSI_OP_MODE_SENSE_10, 10);

	cdb[1] = 0x08;           /* DBD (LLBAA = 0) */
	cdb[2] = page & 0x3f;    /* PC = 00b */
	cdb[3] = subpage;
	put_be16(cdb + 7, alloc_len);
	return n;
}

size_t scsi_cdb_report_tpgs(uint8_t cdb[SCSI_CDB_MAX], uint32_t alloc_len)
{
	size_t n = cdb_start(cdb, SCSI_OP_MAINTENANCE_IN, 12);

	cdb[1] = 0x20 | 0x0a;    /* PARAMETER DATA FORMAT 001b, SERVICE ACTION: REPORT TARGET PORT GROUPS */
	put_be32(cdb + 6, alloc_len);
	return n;
}

/* ---- logical block provisioning ---- */

size_t scsi_cdb_unmap(uint8_t cdb[SCSI_CDB_MAX], uint16_t param_len)
{
	size_t n = cdb_start(cdb, SCSI_OP_UNMAP, 10);

	put_be16(cdb + 7, param_len); /* PARAMETER LIST LENGTH */
	return n;
}

size_t scsi_build_unmap_param(uint8_t *buf, size_t cap, const struct scsi_lba_range *r, size_t n)
{
	size_t len = SCSI_UNMAP_PARAM_LEN(n);

	/* UNMAP DATA LENGTH (len - 2) and the CDB's PARAMETER LIST LENGTH are 16 bits */
	if (!buf || !r || n == 0 || n > (0xffffu - 8u) / 16u || len > cap)
		return 0;
	memset(buf, 0, 8);
	put_be16(buf, (uint16_t)(len - 2));
	put_be16(buf + 2, (uint16_t)(len - 8));
	for (size_t i = 0; i < n; i++) {
		uint8_t *d = buf + 8 + 16 * i;

		put_be64(d, r[i].lba);
		put_be32(d + 8, r[i].nblocks);
		memset(d + 12, 0, 4);
	}
	return len;
}

size_t scsi_cdb_write_same16(uint8_t cdb[SCSI_CDB_MAX], uint64_t lba, uint32_t nblocks, bool unmap)
{
	size_t n = cdb_start(cdb, SCSI_OP_WRITE_SAME_16, 16);

	if (unmap)
		cdb[1] = 0x08; /* UNMAP; ANCHOR, NDOB, LBDATA, PBDATA 0 */
	put_be64(cdb + 2, lba);
	put_be32(cdb + 10, nblocks);
	return n;
}

size_t scsi_cdb_get_lba_status(uint8_t cdb[SCSI_CDB_MAX], uint64_t lba, uint32_t alloc_len)
{
	size_t n = cdb_start(cdb, SCSI_OP_SERVICE_ACTION_IN_16, 16);

	cdb[1] = 0x12; /* SERVICE ACTION: GET LBA STATUS */
	put_be64(cdb + 2, lba);
	put_be32(cdb + 10, alloc_len);
	return n;
}

/*
 * Header: PARAMETER DATA LENGTH (bytes 0-3, counting from byte 4) and 4
 * reserved bytes; then 16-byte descriptors.  Descriptors the allocation
 * length cut off are reported through *more, not as an error.
 */
int scsi_parse_lba_status(const uint8_t *buf, size_t len, struct scsi_lba_status *out, size_t max,
			  size_t *count, bool *more)
{
	uint64_t next = 0;
	uint32_t pdl;
	size_t total, avail, c = 0;

	if (!count || !more)
		return -EPROTO;
	*count = 0;
	*more = false;
	if (!buf || len < 8)
		return -EPROTO;
	pdl = get_be32(buf);
	if (pdl < 4 || (pdl - 4) % 16 != 0)
		return -EPROTO;
	total = (pdl - 4) / 16;
	avail = min_sz((len - 8) / 16, total);
	for (size_t i = 0; i < avail && c < max; i++) {
		const uint8_t *d = buf + 8 + 16 * i;
		uint64_t lba = get_be64(d);
		uint32_t nb = get_be32(d + 8);

		if (nb == 0 || lba + nb < lba || (i > 0 && lba < next))
			return -EPROTO;
		next = lba + nb;
		out[c].lba = lba;
		out[c].nblocks = nb;
		out[c].status = d[12] & 0x0f;
		c++;
	}
	*count = c;
	*more = c < total;
	return 0;
}

uint64_t scsi_lba_status_deallocated(const struct scsi_lba_status *st, size_t n, uint64_t from, uint64_t end,
				     uint64_t *next)
{
	uint64_t sum = 0, at = from;

	for (size_t i = 0; i < n && at < end; i++) {
		uint64_t lo = st[i].lba, hi = st[i].lba + st[i].nblocks; /* no wrap: scsi_parse_lba_status */

		if (hi <= at)
			continue;
		if (lo > at)
			break; /* a gap: what lies in it is not described here */
		if (hi > end)
			hi = end;
		if (st[i].status == SCSI_LBA_DEALLOCATED)
			sum += hi - at;
		at = hi;
	}
	*next = at;
	return sum;
}

/* ---- string helpers ---- */

static bool is_print(uint8_t c)
{
	return c >= 0x20 && c < 0x7f;
}

/*
 * Copy a fixed-width ASCII field into out (cap > 0): non-printable bytes
 * (including NUL padding) become spaces, then trailing spaces are trimmed;
 * leading spaces are dropped too when skip_lead.  Truncated to cap - 1.
 * Returns the string length.
 */
static size_t copy_ascii(const uint8_t *src, size_t n, char *out, size_t cap, bool skip_lead)
{
	size_t o = 0, i = 0;

	if (skip_lead)
		while (i < n && (src[i] == ' ' || !is_print(src[i])))
			i++;
	for (; i < n && o + 1 < cap; i++)
		out[o++] = is_print(src[i]) ? (char)src[i] : ' ';
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
	return o;
}

/* ---- INQUIRY ---- */

int scsi_parse_inquiry(const uint8_t *buf, size_t len, struct scsi_inquiry *out)
{
	size_t n;

	if (!out)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	if (!buf || len < 5)
		return -EPROTO;
	/* ADDITIONAL LENGTH (byte 4) counts the bytes after byte 4. */
	n = min_sz(len, (size_t)buf[4] + 5);
	if (n < 36)
		return -EPROTO;
	out->qualifier = buf[0] >> 5;
	out->device_type = buf[0] & 0x1f;
	out->removable = (buf[1] & 0x80) != 0;
	out->version = buf[2];
	out->tpgs = (uint8_t)scsi_inquiry_tpgs(buf, n);
	copy_ascii(buf + 8, 8, out->vendor, sizeof(out->vendor), false);
	copy_ascii(buf + 16, 16, out->product, sizeof(out->product), false);
	copy_ascii(buf + 32, 4, out->revision, sizeof(out->revision), false);
	return 0;
}

unsigned scsi_inquiry_tpgs(const uint8_t *buf, size_t len)
{
	if (!buf || len < 6)
		return 0;
	return (buf[5] >> 4) & 0x03u;
}

/* ---- VPD pages ---- */

/*
 * Common VPD header check: page code in byte 1, PAGE LENGTH in bytes 2-3.
 * Returns the number of valid bytes (header included), min(len, 4 + page
 * length), or -EPROTO.
 */
static int vpd_header(const uint8_t *buf, size_t len, uint8_t page, size_t *valid)
{
	if (!buf || len < 4 || buf[1] != page)
		return -EPROTO;
	*valid = min_sz(len, 4 + (size_t)get_be16(buf + 2));
	return 0;
}

int scsi_parse_vpd_supported(const uint8_t *buf, size_t len, uint8_t *pages, size_t max, size_t *count)
{
	size_t n, i, c = 0;

	if (!count)
		return -EPROTO;
	*count = 0;
	if (vpd_header(buf, len, 0x00, &n) < 0)
		return -EPROTO;
	for (i = 4; i < n && c < max; i++)
		pages[c++] = buf[i];
	*count = c;
	return 0;
}

/*
 * The serial number is ASCII, right-aligned with leading spaces by some
 * targets, NUL-padded by others: non-printable bytes become spaces, then
 * leading and trailing spaces are removed.  A serial longer than cap - 1
 * is truncated.
 */
int scsi_parse_vpd_serial(const uint8_t *buf, size_t len, char *out, size_t cap)
{
	size_t n;

	if (!out || cap == 0)
		return -EINVAL;
	out[0] = '\0';
	if (vpd_header(buf, len, 0x80, &n) < 0)
		return -EPROTO;
	copy_ascii(buf + 4, n - 4, out, cap, true);
	return 0;
}

int scsi_parse_vpd_devid(const uint8_t *buf, size_t len, struct scsi_designator *out, size_t max, size_t *count)
{
	size_t page_end, n, off, c = 0;

	if (!count)
		return -EPROTO;
	*count = 0;
	if (vpd_header(buf, len, 0x83, &n) < 0)
		return -EPROTO;
	page_end = 4 + (size_t)get_be16(buf + 2);
	for (off = 4; off < page_end; ) {
		size_t dlen;

		/* Descriptor header (4 bytes) and body must lie inside the page. */
		if (off + 4 > page_end)
			return -EPROTO;
		if (off + 4 > n)
			break;  /* cut short by the allocation length */
		dlen = buf[off + 3];
		if (off + 4 + dlen > page_end)
			return -EPROTO;
		if (off + 4 + dlen > n)
			break;
		if (c < max) {
			struct scsi_designator *d = &out[c++];

			memset(d, 0, sizeof(*d));
			d->code_set = buf[off] & 0x0f;
			d->association = (buf[off + 1] >> 4) & 0x03;
			d->type = buf[off + 1] & 0x0f;
			d->len = (uint8_t)dlen;
			memcpy(d->id, buf + off + 4, dlen);
		}
		off += 4 + dlen;
	}
	*count = c;
	return 0;
}

/*
 * The preference of udev's scsi_id for VPD 0x83 (the LU designator that
 * becomes ID_SERIAL): each entry a designator type, an NAA field (NAA_ANY:
 * any) and a code set, tried in this order over all the designators.
 */
#define NAA_ANY 0xff
static const struct {
	uint8_t type, naa, code_set;
} desig_pref[] = {
	{ SCSI_DESIG_NAA, 6, 1 },       { SCSI_DESIG_NAA, 6, 2 },       /* IEEE Registered Extended */
	{ SCSI_DESIG_NAA, 5, 1 },       { SCSI_DESIG_NAA, 5, 2 },       /* IEEE Registered */
	{ SCSI_DESIG_NAA, NAA_ANY, 1 }, { SCSI_DESIG_NAA, NAA_ANY, 2 }, /* locally assigned, the rest */
	{ SCSI_DESIG_EUI64, NAA_ANY, 1 }, { SCSI_DESIG_EUI64, NAA_ANY, 2 },
	{ SCSI_DESIG_T10, NAA_ANY, 1 },   { SCSI_DESIG_T10, NAA_ANY, 2 },
};

/* "<type digit><lowercase hex>"; -ERANGE if it does not fit. */
static int name_hex(const struct scsi_designator *d, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t need = 1 + 2 * (size_t)d->len;
	size_t o = 0;

	if (need + 1 > cap)
		return -ERANGE;
	out[o++] = hex[d->type & 0x0f];
	for (size_t i = 0; i < d->len; i++) {
		out[o++] = hex[d->id[i] >> 4];
		out[o++] = hex[d->id[i] & 0x0f];
	}
	out[o] = '\0';
	return (int)o;
}

/* What udev keeps in a name: letters, digits and "#+-.:=@_"; the rest becomes '_'. */
static char udev_char(uint8_t c)
{
	if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || strchr("#+-.:=@_", c))
		return (char)c;
	return '_';
}

/*
 * ASCII designator as udev names it: the type digit, then the text up to
 * the first NUL with leading and trailing blanks dropped, each run of
 * blanks one '_', and other characters outside udev's set '_'.
 * -ERANGE if it does not fit.
 */
static int name_ascii(const struct scsi_designator *d, char *out, size_t cap)
{
	size_t end = 0, start = 0, o = 0;
	bool blank = false;

	while (end < d->len && d->id[end] != '\0')
		end++;
	while (start < end && isspace(d->id[start]))
		start++;
	while (end > start && isspace(d->id[end - 1]))
		end--;
	if (cap < 2)
		return -ERANGE;
	out[o++] = "0123456789abcdef"[d->type & 0x0f];
	for (size_t i = start; i < end; i++) {
		uint8_t c = d->id[i];

		if (isspace(c)) {
			blank = true;
			continue;
		}
		if (o + 1 + blank >= cap) {
			out[0] = '\0'; /* no half name left behind */
			return -ERANGE;
		}
		if (blank)
			out[o++] = '_';
		blank = false;
		out[o++] = udev_char(c);
	}
	out[o] = '\0';
	return (int)o;
}

int scsi_designator_name(const struct scsi_designator *d, size_t count, char *out, size_t cap)
{
	if (!out || cap == 0)
		return -ERANGE;
	out[0] = '\0';
	if (!d)
		return -ENOENT;
	for (size_t p = 0; p < sizeof(desig_pref) / sizeof(desig_pref[0]); p++) {
		for (size_t i = 0; i < count; i++) {
			const struct scsi_designator *x = &d[i];

			if (x->association != 0 || x->type != desig_pref[p].type ||
			    x->code_set != desig_pref[p].code_set || x->len == 0)
				continue;
			/* the NAA field is the high nibble of the first byte, in either code set (as udev reads it) */
			if (desig_pref[p].naa != NAA_ANY && x->id[0] >> 4 != desig_pref[p].naa)
				continue;
			return x->code_set == 1 ? name_hex(x, out, cap) : name_ascii(x, out, cap);
		}
	}
	return -ENOENT;
}

int scsi_parse_vpd_block_limits(const uint8_t *buf, size_t len, struct scsi_block_limits *out)
{
	size_t n;

	if (!out)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	if (vpd_header(buf, len, 0xb0, &n) < 0)
		return -EPROTO;
	/* Older (SBC-2) pages are 16 bytes long: absent fields stay 0. */
	if (n >= 12)
		out->max_xfer_len = get_be32(buf + 8);
	if (n >= 16)
		out->opt_xfer_len = get_be32(buf + 12);
	if (n >= 24)
		out->max_unmap_lba_count = get_be32(buf + 20);
	if (n >= 28)
		out->max_unmap_desc_count = get_be32(buf + 24);
	if (n >= 32)
		out->unmap_granularity = get_be32(buf + 28);
	if (n >= 44)
		out->max_write_same_len = get_be64(buf + 36);
	return 0;
}

int scsi_parse_vpd_lbp(const uint8_t *buf, size_t len, struct scsi_lbp *out)
{
	size_t n;

	if (!out)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	if (vpd_header(buf, len, 0xb2, &n) < 0 || n < 6)
		return -EPROTO;
	out->lbpu = (buf[5] & 0x80) != 0;
	out->lbpws = (buf[5] & 0x40) != 0;
	out->lbpws10 = (buf[5] & 0x20) != 0;
	/* bit 2 is LBPRZ in SBC-3; SBC-4 widens it to bits 4-2, bit 2 still means zeroes */
	out->lbprz = (buf[5] & 0x04) != 0;
	out->anc_sup = (buf[5] & 0x02) != 0;
	if (n >= 7)
		out->provisioning_type = buf[6] & 0x07;
	return 0;
}

/* ---- REPORT LUNS ---- */

int scsi_parse_report_luns(const uint8_t *buf, size_t len, uint16_t *luns, size_t max, size_t *count, size_t *total)
{
	uint32_t list_len;
	size_t n, c = 0;

	if (!count || !total)
		return -EPROTO;
	*count = 0;
	*total = 0;
	if (!buf || len < 8)
		return -EPROTO;
	list_len = get_be32(buf);
	if (list_len % 8 != 0)
		return -EPROTO;
	*total = list_len / 8;
	n = min_sz((len - 8) / 8, *total);
	for (size_t i = 0; i < n && c < max; i++) {
		const uint8_t *e = buf + 8 + 8 * i;
		bool single = true;

		for (int k = 2; k < 8; k++)
			if (e[k] != 0)
				single = false;
		if (!single)
			continue;  /* a second level: not a LUN we can address */
		switch (e[0] >> 6) {
		case 0: /* peripheral device addressing */
			if ((e[0] & 0x3f) != 0)
				continue;  /* behind a bus other than 0 */
			luns[c++] = e[1];
			break;
		case 1: /* flat space addressing */
			luns[c++] = (uint16_t)((e[0] & 0x3f) << 8 | e[1]);
			break;
		default: /* logical unit / extended addressing: skipped */
			break;
		}
	}
	*count = c;
	return 0;
}

/*
 * Peripheral addressing below 256, flat above.  Flat space addressing has
 * 14 bits: LUNs above 16383 cannot be represented and are masked.
 */
uint64_t scsi_lun_encode(uint16_t lun)
{
	uint64_t b0, b1;

	if (lun < 256) {
		b0 = 0;
		b1 = lun;
	} else {
		b0 = 0x40u | ((lun >> 8) & 0x3fu);
		b1 = lun & 0xffu;
	}
	return b0 << 56 | b1 << 48;
}

int scsi_lun_decode(uint64_t field)
{
	unsigned b0 = (unsigned)(field >> 56), b1 = (unsigned)(field >> 48) & 0xffu;

	if ((field & 0x0000ffffffffffffull) != 0)
		return -EINVAL; /* a second level */
	if (b0 == 0)
		return (int)b1;
	if (b0 >> 6 == 1)
		return (int)((b0 & 0x3fu) << 8 | b1);
	return -EINVAL;
}

/* ---- READ CAPACITY ---- */

/*
 * RETURNED LOGICAL BLOCK ADDRESS 0xffffffff means "too large for this
 * command": nblocks then reads 0x100000000 and the caller must use READ
 * CAPACITY(16) instead.
 */
int scsi_parse_read_capacity10(const uint8_t *buf, size_t len, struct scsi_capacity *out)
{
	if (!out)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	if (!buf || len < 8)
		return -EPROTO;
	out->block_size = get_be32(buf + 4);
	if (out->block_size == 0)
		return -EMEDIUMTYPE; /* answered, but no usable logical block length */
	out->nblocks = (uint64_t)get_be32(buf) + 1;
	return 0;
}

int scsi_parse_read_capacity16(const uint8_t *buf, size_t len, struct scsi_capacity *out)
{
	uint64_t last;

	if (!out)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	if (!buf || len < 12)
		return -EPROTO;
	last = get_be64(buf);
	out->block_size = get_be32(buf + 8);
	if (last == UINT64_MAX)
		return -EPROTO;
	if (out->block_size == 0)
		return -EMEDIUMTYPE; /* answered, but no usable logical block length */
	out->nblocks = last + 1;
	/* byte 12 (P_TYPE, PROT_EN) is ignored */
	if (len > 13)
		out->lbppbe = buf[13] & 0x0f;
	if (len > 14) {
		out->lbpme = (buf[14] & 0x80) != 0;
		out->lbprz = (buf[14] & 0x40) != 0;
	}
	return 0;
}

/* ---- MODE SENSE ---- */

/*
 * The whole mode parameter header must be present and covered by the MODE
 * DATA LENGTH, and the block descriptors it announces must fit in the
 * mode data.
 */
int scsi_parse_mode_sense6_wp(const uint8_t *buf, size_t len, bool *wp)
{
	size_t total;

	if (!wp)
		return -EPROTO;
	*wp = false;
	if (!buf || len < 4)
		return -EPROTO;
	total = (size_t)buf[0] + 1;
	if (total < 4 || 4 + (size_t)buf[3] > total)
		return -EPROTO;
	*wp = (buf[2] & 0x80) != 0;
	return 0;
}

int scsi_parse_mode_sense10_wp(const uint8_t *buf, size_t len, bool *wp)
{
	size_t total;

	if (!wp)
		return -EPROTO;
	*wp = false;
	if (!buf || len < 8)
		return -EPROTO;
	total = (size_t)get_be16(buf) + 2;
	if (total < 8 || 8 + (size_t)get_be16(buf + 6) > total)
		return -EPROTO;
	*wp = (buf[3] & 0x80) != 0;
	return 0;
}

/* ---- sense data ---- */

/*
 * Fixed format: with fewer than 14 bytes (or an ADDITIONAL SENSE LENGTH
 * that stops before ASC/ASCQ) the result is -EPROTO, but `out` still holds
 * the response code, the key (byte 2), INFORMATION when present, and
 * whichever of ASC/ASCQ was there (0 otherwise), so a caller may still use
 * the key.  Descriptor format: the header (8 bytes) is required; the
 * descriptor list is walked within min(len, 8 + ADDITIONAL SENSE LENGTH);
 * a descriptor running past the declared sense data is -EPROTO (header
 * fields stay filled in), one cut short by `len` ends the walk.
 */
static int parse_sense_fixed(const uint8_t *s, size_t len, struct scsi_sense *out)
{
	size_t n = len;

	if (len < 3)
		return -EPROTO;
	out->key = s[2] & 0x0f;
	if (len >= 7 && (s[0] & 0x80)) {
		out->info_valid = true;
		out->info = get_be32(s + 3);
	}
	if (len >= 8)
		n = min_sz(len, 8 + (size_t)s[7]);
	if (n > 12)
		out->asc = s[12];
	if (n > 13)
		out->ascq = s[13];
	return n >= 14 ? 0 : -EPROTO;
}

static int parse_sense_desc(const uint8_t *s, size_t len, struct scsi_sense *out)
{
	size_t end, n, off;

	if (len < 8)
		return -EPROTO;
	out->key = s[1] & 0x0f;
	out->asc = s[2];
	out->ascq = s[3];
	end = 8 + (size_t)s[7];
	n = min_sz(len, end);
	for (off = 8; off < end; ) {
		size_t dlen;

		if (off + 2 > end)
			return -EPROTO;
		if (off + 2 > n)
			break;
		dlen = 2 + (size_t)s[off + 1];
		if (off + dlen > end)
			return -EPROTO;
		if (off + dlen > n)
			break;
		/* INFORMATION descriptor (SPC-4 §4.5.2.2): additional length 0x0a */
		if (s[off] == 0x00 && dlen >= 12 && (s[off + 2] & 0x80)) {
			out->info_valid = true;
			out->info = get_be64(s + off + 4);
		}
		off += dlen;
	}
	return 0;
}

int scsi_parse_sense(const uint8_t *sense, size_t len, struct scsi_sense *out)
{
	if (!out)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	if (!sense || len < 1)
		return -EPROTO;
	out->response_code = sense[0] & 0x7f;
	switch (out->response_code) {
	case 0x70:
	case 0x71:
		return parse_sense_fixed(sense, len, out);
	case 0x72:
	case 0x73:
		return parse_sense_desc(sense, len, out);
	default:
		return -EPROTO;
	}
}
