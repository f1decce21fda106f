/*
 * Reading a peer's memory on the same host: process_vm_readv, the kernel
 * copy UCX's cma transport makes, but with both sides' pieces as iovecs, so
 * that a chunk packed at the sender lands straight in the receiver's runs.
 * UCX 1.13 gives up its cma zero-copy for a receive buffer in pieces
 * (docs/xfer.md, "One host"); this is that copy without the intermediate
 * slot and scatter.
 *
 * Whether a peer may be read is decided per session, by the kernel: the
 * peer listens on an abstract unix socket whose name only the session's
 * two sides can compute, and the reader connects to it and asks the
 * kernel which process listens there (SO_PEERCRED): a process cannot
 * listen in another's name, so the pid is the peer's own, never one it
 * merely names (xfer_link_on_cma; docs/security.md, "Peers on the same
 * host").
 *
 * Layer 1 of libkvrt-xfer: the kernel only.
 */
#ifndef KVRT_XFER_CMA_H
#define KVRT_XFER_CMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "limits.h"

enum { XFER_HOST_BYTES = 16 };

/* This host as the peers on it see it: the kernel's boot id with this
 * process's pid namespace folded in (another host, container or boot
 * differs). */
void xfer_cma_host(uint8_t host[XFER_HOST_BYTES]);

/*
 * Whether this process reads its peers' memory: not with KVRT_XFER_CMA=0,
 * nor when UCX_TLS names transports without shared memory (the caller asked
 * UCX for, say, tcp alone).  *why says which, for the log.
 */
bool xfer_cma_allowed(const char **why);

/*
 * Listen on the abstract unix socket named by `name` (its bytes as hex), so
 * that a reader can learn this process's id from the kernel.  0 and *fd, or
 * the errno.
 */
int xfer_cma_listen(const uint8_t name[32], int *fd);

/*
 * The process that listens on the abstract socket named by `name`, as the
 * kernel reports it (in this process's pid namespace).  0 and *pid, or the
 * errno: ECONNREFUSED (no one listens there, e.g. another network
 * namespace), EAGAIN (its queue is full).
 */
int xfer_cma_listener(const uint8_t name[32], uint32_t *pid);

/*
 * Read `len` bytes at `remote` in process `pid` into the `n` pieces of
 * `local` (in order, `len` bytes in all).  0, or the errno: ESRCH (gone),
 * EPERM (not ours to read), EFAULT (not its memory), EIO (short).
 */
int xfer_cma_read(uint32_t pid, uint64_t remote, const struct iovec *local, size_t n, uint64_t len);

#endif
