/*
 * requests.h - requests and their replies. Calls on a handle do not overlap,
 * so one request is outstanding at a time: a call writes it and reads frames
 * until the reply with its id arrives (incoming.c routes the others).
 */
#ifndef IMAGENT_REQUESTS_H
#define IMAGENT_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client_state.h"

/* A request: its op, the op that answers it, and its records. A field left 0
 * or NULL is not written. */
typedef struct ipc_request {
    uint16_t op;
    uint16_t reply_op;
    const char *client_name; /* HELLO: CLIENT_NAME (IPC_VERSION 1 always) */
    uint64_t session;        /* SESSION */
    const char *service;     /* OPEN of a new session: SERVICE, PRIORITY, DURABLE */
    size_t service_length;
    uint8_t priority;
    uint8_t durable;
    bool has_payload; /* SEND: PAYLOAD, also an empty one */
    const void *payload;
    size_t payload_length;
    uint32_t ttl_ms; /* TTL_MS */
} ipc_request;

/* Writes the request on the current connection and waits until deadline for
 * its reply. Returns 0 (the reply has reply_op), the daemon's error code (an
 * ERROR reply), IMAGENT_ERR_PROTOCOL (another op, or a malformed frame),
 * CONNECTION_LOST, IMAGENT_ERR_TIMEDOUT or IMAGENT_ERR_NO_MEMORY. A reply is
 * in client->reply.frame until request_release_reply(). */
int request_exchange(imagent_client *client, const ipc_request *request, int64_t deadline);

/* Whether a request is needed no more once the handle is connected again
 * (re-attaching may have done its work). */
typedef bool (*request_settled)(imagent_client *client, const ipc_request *request, void *context);

/* request_exchange(), connecting first and again as often as the connection
 * goes away or the daemon is stopping, until deadline. For requests that are
 * safe to repeat. REQUEST_SETTLED when `settled` (may be NULL) says so. */
#define REQUEST_SETTLED 1
int request_until_answered(imagent_client *client, const ipc_request *request, int64_t deadline,
                           request_settled settled, void *context);

void request_release_reply(imagent_client *client);

/* Queues an ACK (request 0: no reply) for the next flush. If it cannot be
 * queued (no memory) it waits for the next re-attach, which repeats it. */
void request_queue_ack(imagent_client *client, uint64_t session_id, uint64_t seq);

#endif
