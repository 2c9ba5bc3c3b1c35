/*
 * connection.h - one stream connection to the daemon and its framing: whole
 * frames are written from a buffer, bytes are read into a buffer that frames
 * are decoded from. Nothing here blocks but connection_wait(), and nothing
 * here knows requests, sessions or events: a lost connection is reported, and
 * the caller (reconnect.c) decides what it means. Also the schedule of
 * reconnect attempts.
 */
#ifndef IMAGENT_CONNECTION_H
#define IMAGENT_CONNECTION_H

#include <stddef.h>
#include <stdint.h>

#include "imagent.h"
#include "ipc_frame.h"

/* The connection is gone (end of file, a reset, a failed write). */
#define CONNECTION_LOST IMAGENT_ERR_UNAVAILABLE

typedef struct daemon_connection {
    int fd;                    /* -1 while closed */
    ipc_buffer in;             /* bytes read; the first `decoded` of them are done with */
    size_t decoded;
    ipc_buffer out;            /* whole frames not yet written */
    uint32_t max_frame_length; /* a longer frame from the daemon is refused from its length field */
} daemon_connection;

void connection_init(daemon_connection *conn);
/* Connects to the daemon's socket (socket_path.h): 0 or a negative code. */
int connection_open(daemon_connection *conn, const char *socket_path);
/* Closes the socket; bytes not yet written or decoded are dropped with it. */
void connection_close(daemon_connection *conn);
/* Closes and frees the buffers. */
void connection_free(daemon_connection *conn);

/* Writes what the socket takes now of the pending frames: 0 (all written,
 * or the socket is full), or CONNECTION_LOST. */
int connection_flush(daemon_connection *conn);

/* What connection_fill() found. */
enum { CONNECTION_NOTHING_NEW = 0, CONNECTION_READ_SOME = 1 };
/* Reads what the socket has now, once: CONNECTION_READ_SOME,
 * CONNECTION_NOTHING_NEW, CONNECTION_LOST, IMAGENT_ERR_PROTOCOL (the next
 * frame is longer than max_frame_length) or IMAGENT_ERR_NO_MEMORY. It may move
 * the read buffer: frames from connection_next_frame() are invalid after it. */
int connection_fill(daemon_connection *conn);
/* Decodes the next buffered frame: IPC_DECODED with *frame, *bytes and *size
 * (pointing into the read buffer, valid until the next connection_fill()),
 * IPC_NEED_MORE, or IMAGENT_ERR_PROTOCOL. */
int connection_next_frame(daemon_connection *conn, ipc_frame *frame, const uint8_t **bytes, size_t *size);

/* Waits up to timeout_ms (-1: for ever) until the socket is readable, or
 * writable while frames wait to be written. 0 (also when a signal cut the
 * wait short) or IMAGENT_ERR_SYSTEM. */
int connection_wait(const daemon_connection *conn, int timeout_ms);

/* How long to wait before reconnect attempt `attempt` (1, 2, ...), in ms:
 *
 *   attempt   1    2    3    4    5    6    7+
 *   delay     0   50  100  200  400  800  1000 (the cap)
 *
 * The first attempt is at once: after a daemon restart the socket is usually
 * back within a second, and a capped doubling keeps a down daemon from being
 * hammered while bounding how late the library notices it is back. */
int imagent_reconnect_delay_ms(unsigned attempt);

typedef struct reconnect_backoff {
    unsigned failed_attempts; /* since the last connection was made or lost */
    int64_t next_attempt_ms;  /* monotonic time before which no attempt is made */
} reconnect_backoff;

/* An established connection was lost: the first attempt goes at once. */
void backoff_after_loss(reconnect_backoff *backoff, int64_t now_ms);
void backoff_after_failure(reconnect_backoff *backoff, int64_t now_ms);
void backoff_after_success(reconnect_backoff *backoff);

#endif
