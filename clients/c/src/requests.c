/*
 * requests.c - a request written, its reply awaited (see requests.h).
 */
#include "requests.h"

#include <stdlib.h>
#include <string.h>

#include "deadline.h"
#include "errors.h"
#include "incoming.h"
#include "reconnect.h"

static uint32_t next_request_id(imagent_client *client)
{
    /* Never 0: request 0 means "no reply" (ACK) and marks events. */
    if (++client->last_request == 0)
        client->last_request = 1;
    return client->last_request;
}

static void encode_request(ipc_buffer *out, uint32_t id, const ipc_request *request)
{
    ipc_frame_begin(out, request->op, id);
    if (request->op == IPC_OP_HELLO) {
        ipc_put_u8(out, IPC_TAG_IPC_VERSION, 1);
        if (request->client_name && request->client_name[0])
            ipc_put_bytes(out, IPC_TAG_CLIENT_NAME, request->client_name, strlen(request->client_name));
    }
    if (request->session)
        ipc_put_u64(out, IPC_TAG_SESSION, request->session);
    if (request->service) {
        ipc_put_bytes(out, IPC_TAG_SERVICE, request->service, request->service_length);
        ipc_put_u8(out, IPC_TAG_PRIORITY, request->priority);
        ipc_put_u8(out, IPC_TAG_DURABLE, request->durable);
    }
    if (request->has_payload)
        ipc_put_bytes(out, IPC_TAG_PAYLOAD, request->payload, request->payload_length);
    if (request->ttl_ms)
        ipc_put_u32(out, IPC_TAG_TTL_MS, request->ttl_ms);
}

/* Writes the pending frames and reads until the awaited reply is in. While
 * writing it reads too: a daemon that cannot write to us may stop reading
 * from us. */
static int await_reply(imagent_client *client, int64_t deadline)
{
    for (;;) {
        if (client->conn.fd < 0)
            return CONNECTION_LOST;
        int result = flush_output(client);
        if (result < 0)
            return result;
        result = incoming_read(client, READ_FOR_REPLY);
        if (result < 0)
            return result;
        if (client->reply.bytes)
            return 0;
        /* Checked here, not from poll(): a stream of events would keep the
         * socket readable past the deadline. */
        int timeout = deadline_poll_timeout(deadline);
        if (timeout == 0) {
            client->reply.request = 0;
            return IMAGENT_ERR_TIMEDOUT;
        }
        if (connection_wait(&client->conn, timeout) < 0) {
            drop_connection(client);
            return CONNECTION_LOST;
        }
    }
}

static int reply_result(const ipc_frame *reply, uint16_t expected_op)
{
    if (reply->op == expected_op)
        return 0;
    if (reply->op == IPC_OP_ERROR)
        return imagent_code_from_frame(reply);
    return IMAGENT_ERR_PROTOCOL;
}

int request_exchange(imagent_client *client, const ipc_request *request, int64_t deadline)
{
    request_release_reply(client);
    uint32_t id = next_request_id(client);
    encode_request(&client->conn.out, id, request);
    if (!ipc_frame_end(&client->conn.out))
        return IMAGENT_ERR_NO_MEMORY;
    client->reply.request = id;
    client->reply.to_hello = request->op == IPC_OP_HELLO;
    int result = await_reply(client, deadline);
    client->reply.to_hello = false;
    return result < 0 ? result : reply_result(&client->reply.frame, request->reply_op);
}

int request_until_answered(imagent_client *client, const ipc_request *request, int64_t deadline,
                           request_settled settled, void *context)
{
    for (;;) {
        int result = ensure_connected(client, deadline);
        if (result < 0)
            return result;
        if (settled && settled(client, request, context))
            return REQUEST_SETTLED;
        result = request_exchange(client, request, deadline);
        if (result == IMAGENT_ERR_SHUTTING_DOWN)
            drop_connection(client); /* refused, so not done: ask the next daemon */
        if (result != CONNECTION_LOST && result != IMAGENT_ERR_SHUTTING_DOWN)
            return result;
    }
}

void request_release_reply(imagent_client *client)
{
    free(client->reply.bytes);
    client->reply.bytes = NULL;
    client->reply.request = 0;
}

void request_queue_ack(imagent_client *client, uint64_t session_id, uint64_t seq)
{
    ipc_buffer *out = &client->conn.out;
    ipc_frame_begin(out, IPC_OP_ACK, 0);
    ipc_put_u64(out, IPC_TAG_SESSION, session_id);
    ipc_put_u64(out, IPC_TAG_SEQ, seq);
    ipc_frame_end(out);
}
