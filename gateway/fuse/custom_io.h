/* SPDX-License-Identifier: MIT */
/*
 * The splice halves of a struct fuse_custom_io (libfuse 3.14,
 * fuse_session_custom_io) that only pass through: both custom I/Os of
 * this folder (fuse_uring.c's, fuse_resume.c's) change the reads and
 * writes of requests and replies, never what libfuse splices.
 */
#ifndef ISERFUSE_CUSTOM_IO_H
#define ISERFUSE_CUSTOM_IO_H

#include <fcntl.h>
#include <sys/types.h>

/* splice(2) as it is; userdata unused.  Returns as splice(2). */
static inline ssize_t gw_io_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
					   unsigned flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

/* splice(2) as it is; userdata unused.  Returns as splice(2). */
static inline ssize_t gw_io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
					unsigned flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

#endif
