/* SPDX-License-Identifier: MIT */
/*
 * LUN identity for multipath: built from a probe, compared field by field
 * with the first difference named (see lun_ident.h).  Pure.
 */
#include "lun_ident.h"

#include <stdio.h>
#include <string.h>

void iscsi_lun_ident_from_info(const struct iscsi_lun_info *info, struct iscsi_lun_ident *out)
{
	memset(out, 0, sizeof(*out));
	out->device_type = info->inq.device_type;
	snprintf(out->serial, sizeof(out->serial), "%s", info->serial);
	size_t n = info->n_lu_desig;
	if (n > ISCSI_LUN_IDENT_DESIG_MAX)
		n = ISCSI_LUN_IDENT_DESIG_MAX;
	memcpy(out->desig, info->lu_desig, n * sizeof(out->desig[0]));
	out->n_desig = n;
	if (out->device_type == 0) {
		out->nblocks = info->cap.nblocks;
		out->block_size = info->cap.block_size;
	}
}

static bool desig_eq(const struct scsi_designator *x, const struct scsi_designator *y)
{
	return x->code_set == y->code_set && x->association == y->association && x->type == y->type &&
	       x->len == y->len && memcmp(x->id, y->id, x->len) == 0;
}

/* The first designator of set (in order) missing from other, or NULL. */
static const struct scsi_designator *desig_missing(const struct iscsi_lun_ident *set,
						   const struct iscsi_lun_ident *other)
{
	for (size_t i = 0; i < set->n_desig; i++) {
		bool found = false;
		for (size_t j = 0; j < other->n_desig && !found; j++)
			found = desig_eq(&set->desig[i], &other->desig[j]);
		if (!found)
			return &set->desig[i];
	}
	return NULL;
}

/* "NAA 600140…" (binary as hex, ASCII/UTF-8 as text without trailing NULs and spaces, at most 64 bytes shown) into out. */
static void desig_format(const struct scsi_designator *d, char *out, size_t cap)
{
	static const char *const names[] = {"vendor", "T10", "EUI-64", "NAA", "port", "TPG", "LUG", "MD5", "name"};
	const char *name = d->type < sizeof(names) / sizeof(names[0]) ? names[d->type] : "type";
	size_t used = (size_t)snprintf(out, cap, "%s ", name);
	size_t len = d->len > 64 ? 64 : d->len;
	while (d->code_set != 1 && len > 0 && (d->id[len - 1] == '\0' || d->id[len - 1] == ' '))
		len--; /* text padded with NULs or spaces */
	for (size_t i = 0; i < len && used + 3 < cap; i++) {
		if (d->code_set == 1)
			used += (size_t)snprintf(out + used, cap - used, "%02x", d->id[i]);
		else
			out[used++] = d->id[i] >= 0x20 && d->id[i] < 0x7f ? (char)d->id[i] : '.';
	}
	if (used < cap)
		out[used] = '\0';
}

bool iscsi_lun_ident_same(const struct iscsi_lun_ident *a, const struct iscsi_lun_ident *b, char *why, size_t cap)
{
	char text[160];
	char dummy[1];
	if (!why || cap == 0) {
		why = dummy;
		cap = sizeof(dummy);
	}
	why[0] = '\0';
	const struct scsi_designator *d = desig_missing(a, b);
	const char *side = "first";
	if (!d) {
		d = desig_missing(b, a);
		side = "second";
	}
	if (d) {
		desig_format(d, text, sizeof(text));
		snprintf(why, cap, "designator %s only on the %s", text, side);
		return false;
	}
	if (strcmp(a->serial, b->serial) != 0) {
		snprintf(why, cap, "serial: \"%s\" vs \"%s\"", a->serial, b->serial);
		return false;
	}
	if (a->device_type != b->device_type) {
		snprintf(why, cap, "device type: 0x%02x vs 0x%02x", a->device_type, b->device_type);
		return false;
	}
	if (a->device_type != 0)
		return true;
	if (a->nblocks != b->nblocks) {
		snprintf(why, cap, "capacity: %llu vs %llu blocks", (unsigned long long)a->nblocks,
			 (unsigned long long)b->nblocks);
		return false;
	}
	if (a->block_size != b->block_size) {
		snprintf(why, cap, "block size: %u vs %u bytes", a->block_size, b->block_size);
		return false;
	}
	return true;
}

/* The IEEE company ID of an NAA 2, 5 or 6 designator (SPC-4 §7.8.6.6), or of an EUI-64 one (§7.8.6.5). */
static uint32_t company_id(const struct scsi_designator *d, unsigned naa)
{
	const uint8_t *b = d->id;
	if (d->type == SCSI_DESIG_EUI64)
		return d->len >= 3 ? (uint32_t)b[0] << 16 | (uint32_t)b[1] << 8 | b[2] : 0;
	if (naa == 2) /* NAA(4) | vendor specific(12) | company ID(24) */
		return d->len >= 5 ? (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4] : 0;
	/* NAA 5, 6: NAA(4) | company ID(24) | ... */
	return d->len >= 4 ? ((uint32_t)(b[0] & 0x0f) << 20 | (uint32_t)b[1] << 12 | (uint32_t)b[2] << 4 | b[3] >> 4) : 0;
}

/* Whether the text designator d holds serial (not empty, spaces trimmed). */
static bool holds_serial(const struct scsi_designator *d, const char *serial)
{
	while (*serial == ' ')
		serial++;
	size_t n = strlen(serial);
	while (n > 0 && serial[n - 1] == ' ')
		n--;
	if (n == 0 || n > d->len)
		return false;
	for (size_t i = 0; i + n <= d->len; i++)
		if (memcmp(d->id + i, serial, n) == 0)
			return true;
	return false;
}

/* Append text to why (used bytes so far in *used). */
static void note(char *why, size_t cap, size_t *used, const char *text)
{
	if (*used + 1 >= cap)
		return;
	int n = snprintf(why + *used, cap - *used, "%s%s", *used ? ", " : "", text);
	if (n > 0)
		*used += (size_t)n < cap - *used ? (size_t)n : cap - *used - 1;
}

bool iscsi_lun_ident_unique(const struct iscsi_lun_ident *id, char *why, size_t cap)
{
	char dummy[1], text[64];
	size_t used = 0;
	if (!why || cap == 0) {
		why = dummy;
		cap = sizeof(dummy);
	}
	why[0] = '\0';
	for (size_t i = 0; i < id->n_desig; i++) {
		const struct scsi_designator *d = &id->desig[i];
		unsigned naa = d->len ? d->id[0] >> 4 : 0;
		switch (d->type) {
		case SCSI_DESIG_NAA:
			if ((naa == 2 || naa == 5 || naa == 6) && company_id(d, naa))
				return true;
			if (naa == 3)
				snprintf(text, sizeof(text), "NAA 3 (locally assigned)");
			else
				snprintf(text, sizeof(text), "NAA %u with company ID 0", naa);
			break;
		case SCSI_DESIG_EUI64:
			if (company_id(d, 0))
				return true;
			snprintf(text, sizeof(text), "EUI-64 with company ID 0");
			break;
		case SCSI_DESIG_SCSI_NAME:
			return true;
		case SCSI_DESIG_T10:
			if (holds_serial(d, id->serial))
				return true;
			snprintf(text, sizeof(text), "T10 vendor ID without the serial");
			break;
		default:
			snprintf(text, sizeof(text), "designator type %u", d->type);
			break;
		}
		note(why, cap, &used, text);
	}
	if (!used)
		note(why, cap, &used, "no designator");
	return false;
}
