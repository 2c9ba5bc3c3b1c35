/*
 * incoming.c - routing the frames the daemon sends (see incoming.h).
 */
#include "incoming.h"

#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "reconnect.h"

void emit_event(imagent_client *client, const imagent_event *event)
{
    if (client->callback)
        client->callback(event, client->callback_data);
}

static bool queue_below(const imagent_client *client, size_t messages, size_t bytes)
{
    return client->queue.count < messages && client->queue.bytes < bytes;
}

static bool goal_met(const imagent_client *client, read_goal goal)
{
    if (goal == READ_FOR_REPLY)
        return client->reply.bytes != NULL;
    return !queue_below(client, IMAGENT_QUEUE_SOFT_MESSAGES, IMAGENT_QUEUE_SOFT_BYTES);
}

/* The MESSAGE record as NUL-terminated text, cut to fit `size` where the
 * cut leaves whole UTF-8 sequences. */
static const char *message_text(const ipc_frame *frame, char *text, size_t size)
{
    ipc_bytes bytes = ipc_frame_bytes(frame, IPC_TAG_MESSAGE);
    if (!bytes.data)
        return NULL;
    size_t length = ipc_utf8_prefix_length((const char *)bytes.data, bytes.length, size - 1);
    memcpy(text, bytes.data, length);
    text[length] = '\0';
    return text;
}

static int take_message(imagent_client *client, const ipc_frame *frame)
{
    if (!ipc_frame_has(frame, IPC_TAG_SESSION) || !ipc_frame_has(frame, IPC_TAG_SEQ) ||
        !ipc_frame_has(frame, IPC_TAG_PAYLOAD))
        return IMAGENT_ERR_PROTOCOL;
    uint64_t id = ipc_frame_uint(frame, IPC_TAG_SESSION);
    uint64_t seq = ipc_frame_uint(frame, IPC_TAG_SEQ);
    ipc_bytes payload = ipc_frame_bytes(frame, IPC_TAG_PAYLOAD);
    session_state *session = session_find(&client->sessions, id);
    bool room = queue_below(client, IMAGENT_QUEUE_HARD_MESSAGES, IMAGENT_QUEUE_HARD_BYTES);
    message_verdict verdict = session_on_message(session, seq, room);
    if (verdict == MESSAGE_OVERFLOW)
        client->resync_needed = true;
    if (verdict != MESSAGE_QUEUE)
        return 0;
    int queued = message_queue_push(&client->queue, id, seq, payload.data, payload.length);
    if (queued < 0)
        return queued;
    session_handed(session, seq);
    return 0;
}

static int take_event(imagent_client *client, const ipc_frame *frame)
{
    char text[512];
    imagent_event event = {0};
    event.session = ipc_frame_uint(frame, IPC_TAG_SESSION);
    event.seq = ipc_frame_uint(frame, IPC_TAG_SEQ);
    event.message = message_text(frame, text, sizeof text);
    if (ipc_frame_has(frame, IPC_TAG_CODE))
        event.code = imagent_code_from_frame(frame);
    switch (frame->op) {
    case IPC_OP_EVENT_MESSAGE:
        return take_message(client, frame);
    case IPC_OP_EVENT_ACKED:
        event.type = IMAGENT_EVENT_ACKED;
        break;
    case IPC_OP_EVENT_EXPIRED:
        event.type = IMAGENT_EVENT_EXPIRED;
        break;
    case IPC_OP_EVENT_SESSION_STATE:
        event.type = IMAGENT_EVENT_SESSION_STATE;
        event.state = (int)ipc_frame_uint(frame, IPC_TAG_SESSION_STATE);
        /* A closed session cannot be attached again: stop tracking it. */
        if (event.state == IMAGENT_SESSION_CLOSED)
            session_forget(&client->sessions, event.session);
        break;
    case IPC_OP_EVENT_LINK_STATE:
        event.type = IMAGENT_EVENT_LINK_STATE;
        event.state = (int)ipc_frame_uint(frame, IPC_TAG_LINK_STATE);
        client->link_state = event.state;
        break;
    case IPC_OP_ERROR:
        event.type = IMAGENT_EVENT_ERROR;
        break;
    default:
        return 0; /* an event of a newer daemon */
    }
    emit_event(client, &event);
    return 0;
}

static bool is_reply_op(uint16_t op)
{
    return (op >= IPC_OP_OK && op <= 0x807F) || op == IPC_OP_ERROR;
}

static bool answers_awaited_request(const imagent_client *client, const ipc_frame *frame)
{
    if (!is_reply_op(frame->op) || client->reply.request == 0)
        return false;
    bool answers_hello = client->reply.to_hello && frame->op == IPC_OP_ERROR && frame->request == 0;
    return frame->request == client->reply.request || answers_hello;
}

/* Keeps a copy of the reply: the read buffer moves on before the caller
 * looks at it. */
static int keep_reply(imagent_client *client, const uint8_t *bytes, size_t size)
{
    client->reply.bytes = malloc(size);
    if (!client->reply.bytes)
        return IMAGENT_ERR_NO_MEMORY;
    memcpy(client->reply.bytes, bytes, size);
    /* Decoded already, under the same limit: it decodes again. */
    size_t consumed;
    ipc_frame_decode(client->reply.bytes, size, client->conn.max_frame_length, &client->reply.frame, &consumed);
    client->reply.request = 0;
    return 0;
}

static int route_frame(imagent_client *client, const uint8_t *bytes, size_t size, const ipc_frame *frame)
{
    if (answers_awaited_request(client, frame))
        return keep_reply(client, bytes, size);
    if (frame->request != 0) {
        /* A late reply to a request given up on: an ACCEPTED still counts. */
        if (frame->op == IPC_OP_ACCEPTED)
            session_accepted(session_find(&client->sessions, ipc_frame_uint(frame, IPC_TAG_SESSION)),
                             ipc_frame_uint(frame, IPC_TAG_SEQ));
        return 0;
    }
    return take_event(client, frame);
}

/* Routes the frames buffered so far, until the goal is met. */
static int route_buffered(imagent_client *client, read_goal goal)
{
    while (!goal_met(client, goal)) {
        ipc_frame frame;
        const uint8_t *bytes;
        size_t size;
        int decoded = connection_next_frame(&client->conn, &frame, &bytes, &size);
        if (decoded == IPC_NEED_MORE)
            return 0;
        if (decoded < 0)
            return decoded;
        int result = route_frame(client, bytes, size, &frame);
        if (result < 0)
            return result;
    }
    return 0;
}

int incoming_read(imagent_client *client, read_goal goal)
{
    for (;;) {
        int result = route_buffered(client, goal);
        if (result == 0) {
            if (goal_met(client, goal))
                return 0;
            if (client->conn.fd < 0)
                return CONNECTION_LOST;
            result = connection_fill(&client->conn);
            if (result == CONNECTION_READ_SOME)
                continue;
            if (result == CONNECTION_NOTHING_NEW)
                return 0;
        }
        drop_connection(client);
        return result;
    }
}
