/* SPDX-License-Identifier: MIT */
/*
 * nulltarget: a null iSCSI target for measuring initiators (not a test, not
 * installed).
 *
 *   nulltarget [--initial-r2t] [--no-immediate-data] PORT [IQN]
 *
 * Listens on 127.0.0.1:PORT only, one thread, epoll, any number of
 * connections, each its own session (MaxConnections=1, ErrorRecoveryLevel=0,
 * no CHAP, no digests).  One LUN, 1: a 1 TiB disk of 512-byte blocks with
 * no storage behind it: READ(10/12/16) answers zeroes in Data-In PDUs (the
 * status in the last one, S bit), WRITE(10/12/16) takes the immediate and
 * unsolicited data and asks for the rest with R2Ts (InitialR2T,
 * FirstBurstLength, MaxBurstLength as negotiated, one R2T outstanding per
 * task), then answers GOOD and drops the data.  --initial-r2t answers
 * InitialR2T=Yes and --no-immediate-data ImmediateData=No whatever the
 * initiator offers (to exercise its R2T paths).  Also REPORT LUNS, INQUIRY
 * (standard, VPD 0x00 0x80 0x83 0xb0 0xb1 0xb2), READ CAPACITY(10)/(16),
 * TEST UNIT READY, MODE SENSE(6)/(10) (not write protected), SYNCHRONIZE
 * CACHE(10)/(16), NOP-Out, Text (SendTargets), task management (answered
 * "function complete") and Logout.  Anything else gets CHECK CONDITION,
 * ILLEGAL REQUEST.
 *
 * The BHS layouts are RFC 7143 §11, encoded here by hand for the target
 * side.  MaxCmdSN is kept at ExpCmdSN + 127.  Exits on SIGTERM or SIGINT;
 * prints "listening PORT" on stdout once it accepts connections.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BHS_LEN 48u
#define BLOCK_SIZE 512u
#define NBLOCKS (1ull << 31) /* 1 TiB */
#define THE_LUN 1u
#define CMD_WINDOW 127u
#define IN_CAP (2u << 20)     /* one PDU: BHS, AHS, a data segment up to MRDSL */
#define OUT_HIGH (4u << 20)   /* stop reading a connection with this much unsent */
#define OUR_MRDSL 262144u     /* what we accept in one data segment */
#define OUR_MAX_BURST 1048576u
#define OUR_FIRST_BURST 262144u
#define TASKS_MAX 1024u       /* writes waiting for data, per connection */
#define TEXT_MAX 16384u

static const char *target_iqn = "iqn.2026-11.org.example:null";
static bool force_initial_r2t, force_no_immediate;
static unsigned listen_port;
static volatile sig_atomic_t stop;

/* A WRITE waiting for its data. */
struct task {
	bool used;
	uint32_t itt, ttt, edtl;
	uint64_t lun;
	uint32_t got;          /* data bytes received so far */
	uint32_t r2t_end;      /* end of the data asked for by the R2T outstanding (0: none) */
	uint32_t next_off;     /* offset the next R2T asks for */
	uint32_t r2tsn;
	bool unsol_done;       /* the unsolicited data (if any) has ended (F bit) */
};

struct conn {
	int fd;
	bool full_feature, closing;
	bool draining;         /* Logout answered and sent, our side shut: reading until the initiator closes */
	uint32_t events;       /* what epoll watches for now */
	uint16_t tsih;
	uint8_t isid[6];
	uint32_t statsn, expcmdsn;
	/* negotiated */
	uint32_t mrdsl;        /* the initiator's MaxRecvDataSegmentLength */
	uint32_t max_burst, first_burst;
	bool immediate_data, initial_r2t;
	bool tpgt_sent;
	/* login text carried over PDUs with the C bit */
	char text[TEXT_MAX];
	size_t text_len;
	uint8_t *in;
	size_t in_len;
	uint8_t *out;
	size_t out_len, out_off, out_cap;
	struct task tasks[TASKS_MAX];
	uint32_t next_ttt;
};

static uint16_t next_tsih = 1;

/* ---------------------------------------------------------------- bytes */

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static void put_dlen(uint8_t *bhs, uint32_t len)
{
	bhs[5] = (uint8_t)(len >> 16);
	bhs[6] = (uint8_t)(len >> 8);
	bhs[7] = (uint8_t)len;
}

/* The LUN number of a LUN field (peripheral or flat addressing). */
static unsigned lun_of(uint64_t field)
{
	unsigned b0 = (unsigned)(field >> 56), b1 = (unsigned)(field >> 48) & 0xffu;
	return (b0 >> 6) == 1 ? ((b0 & 0x3fu) << 8 | b1) : (b0 & 0x3fu) ? 0xffffu : b1;
}

/* ---------------------------------------------------------------- output */

static int out_reserve(struct conn *c, size_t n)
{
	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + n <= c->out_cap)
		return 0;
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
		if (c->out_len + n <= c->out_cap)
			return 0;
	}
	size_t cap = c->out_cap ? c->out_cap : 65536;
	while (cap < c->out_len + n)
		cap *= 2;
	uint8_t *p = realloc(c->out, cap);
	if (!p)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

/* Queue one PDU: the BHS (dlen filled in here), then `len` bytes of data (NULL: zeroes) and padding. */
static int send_pdu(struct conn *c, uint8_t bhs[BHS_LEN], const void *data, uint32_t len)
{
	uint32_t pad = (4u - (len & 3u)) & 3u;
	put_dlen(bhs, len);
	if (out_reserve(c, BHS_LEN + len + pad))
		return -ENOMEM;
	uint8_t *p = c->out + c->out_len;
	memcpy(p, bhs, BHS_LEN);
	if (data)
		memcpy(p + BHS_LEN, data, len);
	else
		memset(p + BHS_LEN, 0, len);
	memset(p + BHS_LEN + len, 0, pad);
	c->out_len += BHS_LEN + len + pad;
	return 0;
}

/* StatSN, ExpCmdSN, MaxCmdSN at bytes 24..35 (every target PDU that has them). */
static void put_sns(struct conn *c, uint8_t *bhs, bool advance_statsn)
{
	put32(bhs + 24, c->statsn);
	if (advance_statsn)
		c->statsn++;
	put32(bhs + 28, c->expcmdsn);
	put32(bhs + 32, c->expcmdsn + CMD_WINDOW);
}

/* A non-immediate command with CmdSN `cmdsn` arrived: the next one expected follows it. */
static void took_cmdsn(struct conn *c, const uint8_t *bhs, uint32_t cmdsn)
{
	if (!(bhs[0] & 0x40) && (int32_t)(cmdsn - c->expcmdsn) >= 0)
		c->expcmdsn = cmdsn + 1;
}

/* ---------------------------------------------------------------- SCSI */

/* SCSI Response: status, optional fixed-format sense (key, asc, ascq), residual against edtl. */
static int scsi_rsp(struct conn *c, const uint8_t *cmd, uint8_t status, uint8_t key, uint8_t asc, uint32_t residual,
		    bool under)
{
	uint8_t b[BHS_LEN] = {0}, sense[2 + 18] = {0};
	uint32_t slen = 0;
	b[0] = 0x21;
	b[1] = 0x80;
	if (residual)
		b[1] |= under ? 0x02 : 0x04;
	b[3] = status;
	memcpy(b + 16, cmd + 16, 4);
	put_sns(c, b, true);
	put32(b + 44, residual);
	if (status == 0x02) {
		put16(sense, 18);
		sense[2] = 0x70;
		sense[4] = key;
		sense[9] = 10;
		sense[14] = asc;
		slen = sizeof(sense);
	}
	return send_pdu(c, b, slen ? sense : NULL, slen);
}

static int check_condition(struct conn *c, const uint8_t *cmd, uint8_t key, uint8_t asc)
{
	uint32_t edtl = get32(cmd + 20);
	return scsi_rsp(c, cmd, 0x02, key, asc, edtl, true);
}

/*
 * Data-In for a read of `len` bytes (data NULL: zeroes) against the
 * command's expected transfer length, the status GOOD in the last PDU and
 * the residual (underflow or overflow) there.
 */
static int data_in(struct conn *c, const uint8_t *cmd, const uint8_t *data, uint32_t len)
{
	uint32_t edtl = get32(cmd + 20), datasn = 0, off = 0, burst = 0, over = 0;
	if (len > edtl) {
		over = len - edtl;
		len = edtl;
	}
	if (len == 0)
		return over ? scsi_rsp(c, cmd, 0, 0, 0, over, false) : scsi_rsp(c, cmd, 0, 0, 0, edtl, true);
	while (off < len) {
		uint8_t b[BHS_LEN] = {0};
		uint32_t n = len - off;
		if (n > c->mrdsl)
			n = c->mrdsl;
		if (n > c->max_burst - burst)
			n = c->max_burst - burst;
		bool last = off + n == len;
		burst += n;
		b[0] = 0x25;
		memcpy(b + 8, cmd + 8, 8);
		memcpy(b + 16, cmd + 16, 4);
		put32(b + 20, 0xffffffffu);
		if (last || burst == c->max_burst) {
			b[1] |= 0x80; /* F: the end of a Data-In sequence */
			burst = 0;
		}
		if (last) {
			b[1] |= 0x01; /* S */
			if (len < edtl) {
				b[1] |= 0x02; /* U */
				put32(b + 44, edtl - len);
			} else if (over) {
				b[1] |= 0x04; /* O */
				put32(b + 44, over);
			}
			put_sns(c, b, true);
		} else {
			put32(b + 28, c->expcmdsn);
			put32(b + 32, c->expcmdsn + CMD_WINDOW);
		}
		put32(b + 36, datasn++);
		put32(b + 40, off);
		if (send_pdu(c, b, data ? data + off : NULL, n))
			return -ENOMEM;
		off += n;
	}
	return 0;
}

static int reply_buf(struct conn *c, const uint8_t *cmd, const uint8_t *buf, uint32_t len, uint32_t alloc)
{
	return data_in(c, cmd, buf, len < alloc ? len : alloc);
}

static int inquiry(struct conn *c, const uint8_t *cmd, const uint8_t *cdb, bool our_lun)
{
	uint8_t buf[256] = {0};
	uint32_t alloc = (uint32_t)cdb[3] << 8 | cdb[4], len;
	if (!(cdb[1] & 1)) {
		if (cdb[2])
			return check_condition(c, cmd, 0x05, 0x24);
		buf[0] = our_lun ? 0x00 : 0x7f; /* a disk; or no LU here (qualifier 3, type 0x1f) */
		buf[2] = 0x06;                  /* SPC-4 */
		buf[3] = 0x02;                  /* response data format 2 */
		buf[4] = 96 - 5;
		buf[7] = 0x02;                  /* CmdQue */
		memcpy(buf + 8, "NULL    ", 8);
		memcpy(buf + 16, "nulltarget      ", 16);
		memcpy(buf + 32, "0001", 4);
		return reply_buf(c, cmd, buf, 96, alloc);
	}
	if (!our_lun)
		return check_condition(c, cmd, 0x05, 0x25);
	static const uint8_t pages[] = {0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2};
	buf[1] = cdb[2];
	switch (cdb[2]) {
	case 0x00:
		memcpy(buf + 4, pages, sizeof(pages));
		len = 4 + sizeof(pages);
		break;
	case 0x80:
		memcpy(buf + 4, "NULLTARGET0001", 14);
		len = 4 + 14;
		break;
	case 0x83: /* one NAA (IEEE registered, 5h) designator of the logical unit, binary */
		buf[4] = 0x01;
		buf[5] = 0x03;
		buf[7] = 8;
		memcpy(buf + 8, (const uint8_t[]){0x50, 0x01, 0x40, 0x50, 0x00, 0x00, 0x00, 0x01}, 8);
		len = 4 + 12;
		break;
	case 0xb0: /* block limits: transfers up to 2048 blocks (1 MiB), no UNMAP */
		put32(buf + 8, 2048);
		put32(buf + 12, 8);
		len = 4 + 0x3c;
		break;
	case 0xb1: /* block device characteristics: non-rotating */
		put16(buf + 4, 1);
		len = 4 + 0x3c;
		break;
	case 0xb2: /* logical block provisioning: none */
		len = 4 + 4;
		break;
	default:
		return check_condition(c, cmd, 0x05, 0x24);
	}
	put16(buf + 2, (uint16_t)(len - 4));
	return reply_buf(c, cmd, buf, len, alloc);
}

/* A free task slot, or NULL. */
static struct task *task_new(struct conn *c)
{
	for (unsigned i = 0; i < TASKS_MAX; i++)
		if (!c->tasks[i].used)
			return &c->tasks[i];
	return NULL;
}

static struct task *task_find(struct conn *c, uint32_t itt)
{
	for (unsigned i = 0; i < TASKS_MAX; i++)
		if (c->tasks[i].used && c->tasks[i].itt == itt)
			return &c->tasks[i];
	return NULL;
}

/* Ask for the next burst of a write, or answer it once all its data is in. */
static int task_progress(struct conn *c, struct task *t)
{
	if (t->r2t_end || !t->unsol_done)
		return 0;
	if (t->got >= t->edtl) {
		uint8_t cmd[BHS_LEN] = {0};
		put32(cmd + 16, t->itt);
		put32(cmd + 20, t->edtl);
		t->used = false;
		return scsi_rsp(c, cmd, 0, 0, 0, 0, false);
	}
	uint8_t b[BHS_LEN] = {0};
	uint32_t n = t->edtl - t->next_off;
	if (n > c->max_burst)
		n = c->max_burst;
	b[0] = 0x31;
	b[1] = 0x80;
	put64(b + 8, t->lun);
	put32(b + 16, t->itt);
	put32(b + 20, t->ttt);
	put_sns(c, b, false);
	put32(b + 36, t->r2tsn++);
	put32(b + 40, t->next_off);
	put32(b + 44, n);
	t->r2t_end = t->next_off + n;
	t->next_off += n;
	return send_pdu(c, b, NULL, 0);
}

static int write_cmd(struct conn *c, const uint8_t *cmd, uint64_t lba, uint32_t blocks)
{
	uint32_t edtl = get32(cmd + 20), dlen = (uint32_t)cmd[5] << 16 | (uint32_t)cmd[6] << 8 | cmd[7];
	if (lba + blocks > NBLOCKS || lba + blocks < lba)
		return check_condition(c, cmd, 0x05, 0x21);
	if (edtl != blocks * BLOCK_SIZE || !(cmd[1] & 0x20))
		return check_condition(c, cmd, 0x05, 0x24);
	if (edtl == 0)
		return scsi_rsp(c, cmd, 0, 0, 0, 0, false);
	struct task *t = task_new(c);
	if (!t) /* TASK SET FULL */
		return scsi_rsp(c, cmd, 0x28, 0, 0, 0, false);
	memset(t, 0, sizeof(*t));
	t->used = true;
	t->itt = get32(cmd + 16);
	t->ttt = c->next_ttt++;
	if (t->ttt == 0xffffffffu)
		t->ttt = c->next_ttt++;
	t->edtl = edtl;
	t->lun = get64(cmd + 8);
	t->got = dlen;
	/* F=0 on the command: unsolicited Data-Out follows (InitialR2T=No) */
	t->unsol_done = (cmd[1] & 0x80) != 0;
	/* Unsolicited data (immediate and Data-Out) covers at most FirstBurstLength: R2Ts ask from there. */
	t->next_off = dlen;
	if (!t->unsol_done && !c->initial_r2t)
		t->next_off = edtl < c->first_burst ? edtl : c->first_burst;
	return task_progress(c, t);
}

static int scsi_cmd(struct conn *c, const uint8_t *cmd)
{
	const uint8_t *cdb = cmd + 32;
	unsigned lun = lun_of(get64(cmd + 8));
	bool ours = lun == THE_LUN;
	uint8_t buf[64] = {0};
	uint32_t alloc;
	uint64_t lba;
	uint32_t blocks;

	took_cmdsn(c, cmd, get32(cmd + 24));
	if (cdb[0] == 0xa0) { /* REPORT LUNS */
		alloc = get32(cdb + 6);
		put32(buf, 8);
		buf[9] = THE_LUN;
		return reply_buf(c, cmd, buf, 16, alloc);
	}
	if (cdb[0] == 0x12)
		return inquiry(c, cmd, cdb, ours);
	if (!ours)
		return check_condition(c, cmd, 0x05, 0x25);
	switch (cdb[0]) {
	case 0x00: /* TEST UNIT READY */
	case 0x35: /* SYNCHRONIZE CACHE(10) */
	case 0x91: /* SYNCHRONIZE CACHE(16) */
		return scsi_rsp(c, cmd, 0, 0, 0, get32(cmd + 20), true);
	case 0x25: /* READ CAPACITY(10) */
		put32(buf, (uint32_t)(NBLOCKS - 1));
		put32(buf + 4, BLOCK_SIZE);
		return reply_buf(c, cmd, buf, 8, 8);
	case 0x9e: /* SERVICE ACTION IN(16) */
		if ((cdb[1] & 0x1f) != 0x10)
			return check_condition(c, cmd, 0x05, 0x20);
		put64(buf, NBLOCKS - 1);
		put32(buf + 8, BLOCK_SIZE);
		return reply_buf(c, cmd, buf, 32, get32(cdb + 10));
	case 0x1a: /* MODE SENSE(6): the header only, not write protected */
		buf[0] = 3;
		return reply_buf(c, cmd, buf, 4, cdb[4]);
	case 0x5a: /* MODE SENSE(10) */
		put16(buf, 6);
		return reply_buf(c, cmd, buf, 8, (uint32_t)cdb[7] << 8 | cdb[8]);
	case 0x28: /* READ(10) */
	case 0x2a: /* WRITE(10) */
		lba = get32(cdb + 2);
		blocks = (uint32_t)cdb[7] << 8 | cdb[8];
		break;
	case 0xa8: /* READ(12) */
	case 0xaa: /* WRITE(12) */
		lba = get32(cdb + 2);
		blocks = get32(cdb + 6);
		break;
	case 0x88: /* READ(16) */
	case 0x8a: /* WRITE(16) */
		lba = get64(cdb + 2);
		blocks = get32(cdb + 10);
		break;
	default:
		return check_condition(c, cmd, 0x05, 0x20);
	}
	if (cdb[0] == 0x2a || cdb[0] == 0xaa || cdb[0] == 0x8a)
		return write_cmd(c, cmd, lba, blocks);
	if (lba + blocks > NBLOCKS || lba + blocks < lba)
		return check_condition(c, cmd, 0x05, 0x21);
	if ((uint64_t)blocks * BLOCK_SIZE > 0xffffffffu)
		return check_condition(c, cmd, 0x05, 0x24);
	return data_in(c, cmd, NULL, blocks * BLOCK_SIZE);
}

static int data_out(struct conn *c, const uint8_t *bhs, uint32_t dlen)
{
	struct task *t = task_find(c, get32(bhs + 16));
	if (!t)
		return 0; /* a task we answered (or never had): the data is dropped */
	uint32_t ttt = get32(bhs + 20);
	t->got += dlen;
	if (bhs[1] & 0x80) {
		if (ttt == 0xffffffffu)
			t->unsol_done = true;
		else if (ttt == t->ttt)
			t->r2t_end = 0;
	}
	return task_progress(c, t);
}

/* ---------------------------------------------------------------- text */

static int text_add(char *buf, size_t *len, const char *key, const char *value)
{
	int n = snprintf(buf + *len, TEXT_MAX - *len, "%s=%s", key, value);
	if (n < 0 || (size_t)n + 1 > TEXT_MAX - *len)
		return -ENOSPC;
	*len += (size_t)n + 1;
	return 0;
}

static uint32_t min_num(const char *v, uint32_t ours)
{
	unsigned long n = strtoul(v, NULL, 0);
	return n < ours ? (uint32_t)n : ours;
}

/* Answer one key of the initiator's login offer (RFC 7143 §13) into out. */
static int login_key(struct conn *c, const char *key, const char *v, char *out, size_t *len)
{
	char num[16];
	if (!strcmp(key, "InitiatorName") || !strcmp(key, "InitiatorAlias") || !strcmp(key, "TargetName") ||
	    !strcmp(key, "SessionType"))
		return 0;
	if (!strcmp(key, "AuthMethod"))
		return text_add(out, len, key, "None");
	if (!strcmp(key, "HeaderDigest") || !strcmp(key, "DataDigest"))
		return text_add(out, len, key, "None");
	if (!strcmp(key, "MaxRecvDataSegmentLength")) {
		c->mrdsl = (uint32_t)strtoul(v, NULL, 0);
		if (c->mrdsl < 512)
			c->mrdsl = 512;
		if (c->mrdsl > OUR_MRDSL)
			c->mrdsl = OUR_MRDSL;
		snprintf(num, sizeof(num), "%u", OUR_MRDSL);
		return text_add(out, len, key, num);
	}
	if (!strcmp(key, "MaxBurstLength")) {
		c->max_burst = min_num(v, OUR_MAX_BURST);
		snprintf(num, sizeof(num), "%u", c->max_burst);
		return text_add(out, len, key, num);
	}
	if (!strcmp(key, "FirstBurstLength")) {
		c->first_burst = min_num(v, OUR_FIRST_BURST);
		snprintf(num, sizeof(num), "%u", c->first_burst);
		return text_add(out, len, key, num);
	}
	if (!strcmp(key, "ImmediateData")) { /* AND */
		c->immediate_data = !strcmp(v, "Yes") && !force_no_immediate;
		return text_add(out, len, key, c->immediate_data ? "Yes" : "No");
	}
	if (!strcmp(key, "InitialR2T")) { /* OR */
		c->initial_r2t = strcmp(v, "No") != 0 || force_initial_r2t;
		return text_add(out, len, key, c->initial_r2t ? "Yes" : "No");
	}
	if (!strcmp(key, "DataPDUInOrder") || !strcmp(key, "DataSequenceInOrder"))
		return text_add(out, len, key, "Yes");
	if (!strcmp(key, "MaxConnections") || !strcmp(key, "MaxOutstandingR2T"))
		return text_add(out, len, key, "1");
	if (!strcmp(key, "ErrorRecoveryLevel"))
		return text_add(out, len, key, "0");
	if (!strcmp(key, "DefaultTime2Wait") || !strcmp(key, "DefaultTime2Retain"))
		return text_add(out, len, key, v);
	if (!strcmp(key, "IFMarker") || !strcmp(key, "OFMarker") || !strcmp(key, "RDMAExtensions"))
		return text_add(out, len, key, "No");
	if (!strcmp(key, "IFMarkInt") || !strcmp(key, "OFMarkInt"))
		return text_add(out, len, key, "Irrelevant");
	return text_add(out, len, key, "NotUnderstood");
}

/* Walk "key=value\0" pairs. */
static int text_walk(struct conn *c, char *text, size_t tlen, char *out, size_t *olen, bool *discovery,
		     bool *sendtargets)
{
	size_t off = 0;
	while (off < tlen) {
		char *kv = text + off;
		size_t n = strnlen(kv, tlen - off);
		off += n + 1;
		if (!n)
			continue;
		char *eq = strchr(kv, '=');
		if (!eq)
			continue;
		*eq = '\0';
		if (!strcmp(kv, "SessionType") && discovery)
			*discovery = !strcmp(eq + 1, "Discovery");
		if (!strcmp(kv, "SendTargets")) {
			if (sendtargets)
				*sendtargets = true;
			continue;
		}
		if (login_key(c, kv, eq + 1, out, olen))
			return -ENOSPC;
	}
	return 0;
}

static int login(struct conn *c, const uint8_t *req, uint8_t *data, uint32_t dlen)
{
	uint8_t b[BHS_LEN] = {0};
	char out[TEXT_MAX];
	size_t olen = 0;
	bool transit = req[1] & 0x80, cont = req[1] & 0x40, discovery = false;
	uint8_t csg = (req[1] >> 2) & 3, nsg = req[1] & 3;

	if (c->full_feature)
		return -EPROTO;
	if (dlen > TEXT_MAX - c->text_len - 1)
		return -EPROTO;
	memcpy(c->text + c->text_len, data, dlen);
	c->text_len += dlen;
	b[0] = 0x23;
	memcpy(b + 8, req + 8, 6);
	memcpy(b + 16, req + 16, 4);
	if (!c->tsih) {
		memcpy(c->isid, req + 8, 6);
		c->tsih = next_tsih++;
		if (!next_tsih)
			next_tsih = 1;
		c->expcmdsn = get32(req + 24);
		c->statsn = get32(req + 28);
	}
	put16(b + 14, c->tsih);
	if (cont) { /* more text to come: an empty answer, same stage, no transit */
		b[1] = (uint8_t)(csg << 2);
		put_sns(c, b, true);
		return send_pdu(c, b, NULL, 0);
	}
	c->text[c->text_len] = '\0';
	if (text_walk(c, c->text, c->text_len, out, &olen, &discovery, NULL))
		return -EPROTO;
	c->text_len = 0;
	if (!c->tpgt_sent && !discovery) {
		text_add(out, &olen, "TargetPortalGroupTag", "1");
		c->tpgt_sent = true;
	}
	if (csg == 3 || (transit && nsg != 3 && nsg != 1) || (transit && nsg <= csg)) {
		b[36] = 0x02; /* initiator error */
		b[37] = 0x00;
		put_sns(c, b, true);
		send_pdu(c, b, NULL, 0);
		return -EPROTO;
	}
	b[1] = (uint8_t)(csg << 2);
	if (transit)
		b[1] |= (uint8_t)(0x80 | nsg);
	put_sns(c, b, true);
	if (olen > c->mrdsl && olen > 8192)
		return -EPROTO;
	if (transit && nsg == 3)
		c->full_feature = true;
	return send_pdu(c, b, out, (uint32_t)olen);
}

static int text_req(struct conn *c, const uint8_t *req, uint8_t *data, uint32_t dlen)
{
	uint8_t b[BHS_LEN] = {0};
	char in[TEXT_MAX], out[TEXT_MAX];
	size_t olen = 0;
	bool st = false;

	took_cmdsn(c, req, get32(req + 24));
	if (dlen >= TEXT_MAX)
		dlen = TEXT_MAX - 1;
	memcpy(in, data, dlen);
	in[dlen] = '\0';
	if (text_walk(c, in, dlen, out, &olen, NULL, &st))
		return -EPROTO;
	if (st) {
		char addr[64];
		snprintf(addr, sizeof(addr), "127.0.0.1:%u,1", listen_port);
		text_add(out, &olen, "TargetName", target_iqn);
		text_add(out, &olen, "TargetAddress", addr);
	}
	b[0] = 0x24;
	b[1] = 0x80;
	memcpy(b + 16, req + 16, 4);
	put32(b + 20, 0xffffffffu);
	put_sns(c, b, true);
	return send_pdu(c, b, out, (uint32_t)olen);
}

/* ---------------------------------------------------------------- PDUs */

static int handle_pdu(struct conn *c, uint8_t *bhs, uint8_t *data, uint32_t dlen)
{
	uint8_t op = bhs[0] & 0x3f, b[BHS_LEN] = {0};

	if (!c->full_feature && op != 0x03)
		return -EPROTO;
	switch (op) {
	case 0x03:
		return login(c, bhs, data, dlen);
	case 0x01:
		return scsi_cmd(c, bhs);
	case 0x05:
		return data_out(c, bhs, dlen);
	case 0x00: /* NOP-Out */
		took_cmdsn(c, bhs, get32(bhs + 24));
		if (get32(bhs + 16) == 0xffffffffu)
			return 0; /* an answer to a NOP-In of ours: we send none */
		b[0] = 0x20;
		b[1] = 0x80;
		memcpy(b + 8, bhs + 8, 8);
		memcpy(b + 16, bhs + 16, 4);
		put32(b + 20, 0xffffffffu);
		put_sns(c, b, true);
		return send_pdu(c, b, data, dlen);
	case 0x04:
		return text_req(c, bhs, data, dlen);
	case 0x02: /* task management: "function complete"; ABORT TASK drops a write waiting for data */
		took_cmdsn(c, bhs, get32(bhs + 24));
		if ((bhs[1] & 0x7f) == 1) {
			struct task *t = task_find(c, get32(bhs + 20));
			if (t)
				t->used = false;
		}
		b[0] = 0x22;
		b[1] = 0x80;
		memcpy(b + 16, bhs + 16, 4);
		put_sns(c, b, true);
		return send_pdu(c, b, NULL, 0);
	case 0x06: /* Logout: answer, then close once it is sent */
		took_cmdsn(c, bhs, get32(bhs + 24));
		b[0] = 0x26;
		b[1] = 0x80;
		memcpy(b + 16, bhs + 16, 4);
		put_sns(c, b, true);
		c->closing = true;
		return send_pdu(c, b, NULL, 0);
	default: /* Reject: command not supported, with the BHS */
		b[0] = 0x3f;
		b[1] = 0x80;
		b[2] = 0x05;
		put32(b + 16, 0xffffffffu);
		put_sns(c, b, false);
		return send_pdu(c, b, bhs, BHS_LEN);
	}
}

/* Parse the complete PDUs in c->in. */
static int parse_in(struct conn *c)
{
	size_t off = 0;
	int rc = 0;
	while (c->in_len - off >= BHS_LEN) {
		uint8_t *bhs = c->in + off;
		uint32_t ahs = (uint32_t)bhs[4] * 4u;
		uint32_t dlen = (uint32_t)bhs[5] << 16 | (uint32_t)bhs[6] << 8 | bhs[7];
		size_t total = BHS_LEN + ahs + dlen + ((4u - (dlen & 3u)) & 3u);
		if (total > IN_CAP) {
			rc = -EPROTO;
			break;
		}
		if (c->in_len - off < total)
			break;
		if ((rc = handle_pdu(c, bhs, bhs + BHS_LEN + ahs, dlen)))
			break;
		off += total;
		if (c->closing)
			break;
	}
	if (off) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
	return rc;
}

/* ---------------------------------------------------------------- loop */

static int ep;

static void conn_free(struct conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
}

/* Send what is queued and watch for what is needed next; returns -1 on a dead connection. */
static int flush_out(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -1;
		}
		c->out_off += (size_t)n;
	}
	size_t pending = c->out_len - c->out_off;
	if (!pending)
		c->out_off = c->out_len = 0;
	bool read_ok = (!c->closing || c->draining) && pending < OUT_HIGH;
	uint32_t want = (read_ok ? (uint32_t)EPOLLIN : 0u) | (pending ? (uint32_t)EPOLLOUT : 0u);
	if (want != c->events) {
		struct epoll_event ev = {.events = want, .data.ptr = c};
		if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev))
			return -1;
		c->events = want;
	}
	return 0;
}

/*
 * After the Logout Response: shut our side down and read (dropping it)
 * whatever still comes until the initiator closes, so that the close does
 * not reset the connection under the response it has not read yet.
 */
static int drain(struct conn *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->in, IN_CAP, 0);
		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && errno == EAGAIN ? 0 : -1;
	}
}

static void on_conn(struct conn *c, uint32_t events)
{
	if (c->draining) {
		if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && drain(c))
			goto dead;
		return;
	}
	if (!c->closing && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		for (;;) {
			ssize_t n = recv(c->fd, c->in + c->in_len, IN_CAP - c->in_len, 0);
			if (n == 0)
				goto dead;
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN)
					break;
				goto dead;
			}
			c->in_len += (size_t)n;
			if (parse_in(c))
				goto dead_after_flush;
			if (c->closing || c->out_len - c->out_off >= OUT_HIGH)
				break;
		}
	}
	if (flush_out(c))
		goto dead;
	if (c->closing && c->out_len == 0) {
		if (shutdown(c->fd, SHUT_WR))
			goto dead;
		c->draining = true;
		if (flush_out(c))
			goto dead;
	}
	return;
dead_after_flush:
	flush_out(c);
dead:
	conn_free(c);
}

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--initial-r2t"))
			force_initial_r2t = true;
		else if (!strcmp(argv[i], "--no-immediate-data"))
			force_no_immediate = true;
		else
			break;
	}
	if (argc - i < 1 || argc - i > 2) {
		fprintf(stderr, "usage: nulltarget [--initial-r2t] [--no-immediate-data] PORT [IQN]\n");
		return 2;
	}
	listen_port = (unsigned)strtoul(argv[i], NULL, 10);
	if (argc - i == 2)
		target_iqn = argv[i + 1];
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)listen_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 64)) {
		perror("nulltarget: listen");
		return 1;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
	printf("listening %u\n", listen_port);
	fflush(stdout);

	while (!stop) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, 500);
		if (n < 0 && errno != EINTR) {
			perror("nulltarget: epoll_wait");
			return 1;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr) {
				on_conn(evs[i].data.ptr, evs[i].events);
				continue;
			}
			int fd;
			while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
				struct conn *c = calloc(1, sizeof(*c));
				if (!c || !(c->in = malloc(IN_CAP))) {
					free(c);
					close(fd);
					continue;
				}
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				c->fd = fd;
				c->mrdsl = 8192;
				c->max_burst = 262144;
				c->first_burst = 65536;
				c->initial_r2t = true;
				c->immediate_data = true;
				c->next_ttt = 1;
				c->events = EPOLLIN;
				struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
				if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
					close(fd);
					free(c->in);
					free(c);
				}
			}
		}
	}
	close(lfd);
	return 0;
}
