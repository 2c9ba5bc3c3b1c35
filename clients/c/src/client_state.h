/*
 * client_state.h - the client handle. Each part of it is run by one file:
 *
 *   client.c     the public calls: arguments, retries, results
 *   requests.c   a request written and its reply awaited (one at a time)
 *   incoming.c   the frames the daemon sends: the awaited reply, late
 *                replies, events to the callback, messages to the queue
 *   reconnect.c  the connection's life: HELLO, re-attaching the sessions,
 *                losing it, connecting again with backoff
 *   sessions.c   per session, what resuming needs (pure decisions)
 *   connection.c the socket and its framing
 */
#ifndef IMAGENT_CLIENT_STATE_H
#define IMAGENT_CLIENT_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "connection.h"
#include "imagent.h"
#include "ipc_frame.h"
#include "message_queue.h"
#include "sessions.h"

#define CLIENT_NAME_LIMIT 128
#define DEFAULT_MAX_PAYLOAD 1048576u /* until WELCOME says otherwise */
/* The largest MAX_PAYLOAD the library believes from WELCOME: the most an
 * imagentd can announce (max_payload_bytes, imagentd.toml(5)), as in the
 * Swift and Python clients. */
#define IMAGENT_MAX_PAYLOAD_CAP (16u * 1024 * 1024)

/* Queue limits (see libimagent(3), BOUNDED MEMORY). While the queue holds
 * SOFT messages or bytes the library reads the socket only to find a reply it
 * waits for; messages read past HARD are dropped and fetched again later. */
#define IMAGENT_QUEUE_SOFT_MESSAGES 1024u
#define IMAGENT_QUEUE_SOFT_BYTES (16u * 1024 * 1024)
#define IMAGENT_QUEUE_HARD_MESSAGES (4 * IMAGENT_QUEUE_SOFT_MESSAGES)
#define IMAGENT_QUEUE_HARD_BYTES (4 * IMAGENT_QUEUE_SOFT_BYTES)

/* The reply the one outstanding request waits for. */
typedef struct awaited_reply {
    uint32_t request; /* its id; 0 while none is awaited */
    bool to_hello;    /* an ERROR with request 0 answers HELLO too */
    uint8_t *bytes;   /* a copy of the reply frame once it came (the read buffer moves on) */
    ipc_frame frame;  /* decoded from bytes */
} awaited_reply;

struct imagent_client {
    char *socket_path;
    char client_name[CLIENT_NAME_LIMIT + 1];
    int timeout_ms;

    daemon_connection conn;
    reconnect_backoff backoff;
    bool was_connected; /* a connection was made once: later ones are RECONNECTED */
    bool connecting;    /* inside a connect attempt: no DISCONNECTED, no backoff reset */
    uint32_t max_payload;
    char daemon_version[64];
    int link_state;

    uint32_t last_request;
    awaited_reply reply;

    session_table sessions;
    message_queue queue;
    bool resync_needed; /* some session overflowed: reconnect once the queue is empty */

    imagent_event_callback callback;
    void *callback_data;
};

#endif
