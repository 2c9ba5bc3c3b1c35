/*
 * fake_daemon.h - a scripted imagentd for the client tests: a thread that
 * listens on a Unix socket in a temporary folder and runs a script that
 * reads the client's frames and writes the daemon's, one step at a time.
 */
#ifndef IMAGENT_FAKE_DAEMON_H
#define IMAGENT_FAKE_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc_frame.h"

typedef struct fake_daemon fake_daemon;

/* One accepted connection and the frames read from it. */
typedef struct fake_connection {
    int fd;
    uint8_t buffer[1 << 16];
    size_t length;
    uint8_t frame_bytes[1 << 16];
    ipc_frame frame; /* the last frame read; points into frame_bytes */
} fake_connection;

typedef void (*fake_script)(fake_daemon *daemon, void *context);

fake_daemon *fake_daemon_start(fake_script script, void *context);
const char *fake_daemon_path(const fake_daemon *daemon);
/* Waits for the script to end; returns how many of its steps failed. */
int fake_daemon_finish(fake_daemon *daemon);

/* Script steps. Each failure is counted and makes the later steps fail too. */
bool fake_accept(fake_daemon *daemon, fake_connection *connection);
bool fake_expect(fake_daemon *daemon, fake_connection *connection, uint16_t op);
/* Waits for the client to hang up; anything it sends first is a failure. */
bool fake_expect_end(fake_daemon *daemon, fake_connection *connection);
void fake_write(fake_daemon *daemon, fake_connection *connection, ipc_buffer *frame);
void fake_close(fake_connection *connection);
/* Reads HELLO and answers WELCOME (MAX_PAYLOAD 1 MiB, link connected). */
bool fake_handshake(fake_daemon *daemon, fake_connection *connection);
/* fake_accept(), then fake_handshake(). */
bool fake_connect(fake_daemon *daemon, fake_connection *connection);
/* Reads OPEN and answers OPENED for session id with the given seqs. */
bool fake_opened(fake_daemon *daemon, fake_connection *connection, uint64_t id, uint64_t sent_seq,
                 uint64_t delivered_seq);
void fake_message(fake_daemon *daemon, fake_connection *connection, uint64_t id, uint64_t seq, const char *text);
/* Answers the last frame read (a SEND) with ACCEPTED for seq. */
void fake_accepted(fake_daemon *daemon, fake_connection *connection, uint64_t id, uint64_t seq);
void fake_reply(fake_daemon *daemon, fake_connection *connection, uint16_t op);
void fake_fail(fake_daemon *daemon, const char *why);

#endif
