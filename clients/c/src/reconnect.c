/*
 * reconnect.c - making, losing and making again the connection (see
 * reconnect.h).
 */
#include "reconnect.h"

#include <stdlib.h>
#include <string.h>

#include "deadline.h"
#include "incoming.h"
#include "requests.h"

/* A handshake started by a polling call (timeout 0) gets this long to finish,
 * or no reconnect could ever succeed from an event loop. */
#define HANDSHAKE_MIN_MS 1000

void drop_connection(imagent_client *client)
{
    if (client->conn.fd < 0)
        return;
    connection_close(&client->conn);
    request_release_reply(client);
    if (client->connecting)
        return; /* a failed attempt: ensure_connected() backs off */
    backoff_after_loss(&client->backoff, monotonic_ms());
    if (client->was_connected) {
        imagent_event event = {.type = IMAGENT_EVENT_DISCONNECTED};
        emit_event(client, &event);
    }
}

int flush_output(imagent_client *client)
{
    int result = connection_flush(&client->conn);
    if (result < 0)
        drop_connection(client);
    return result;
}

static void set_max_payload(imagent_client *client, uint32_t max_payload)
{
    client->max_payload = max_payload;
    /* At most 16 MiB + 64 KiB (the cap): no uint32_t overflow. */
    client->conn.max_frame_length = max_payload + IPC_FRAME_OVERHEAD;
}

static int take_welcome(imagent_client *client)
{
    const ipc_frame *welcome = &client->reply.frame;
    if (ipc_frame_has(welcome, IPC_TAG_IPC_VERSION) && ipc_frame_uint(welcome, IPC_TAG_IPC_VERSION) != 1)
        return IMAGENT_ERR_VERSION_UNSUPPORTED;
    uint64_t max_payload = ipc_frame_uint(welcome, IPC_TAG_MAX_PAYLOAD);
    if (!ipc_frame_has(welcome, IPC_TAG_MAX_PAYLOAD) || max_payload == 0)
        return IMAGENT_ERR_PROTOCOL;
    /* A daemon announcing more than we are willing to buffer still gets our
     * sane cap: we send no more, and refuse frames beyond it. */
    set_max_payload(client, max_payload > IMAGENT_MAX_PAYLOAD_CAP ? IMAGENT_MAX_PAYLOAD_CAP : (uint32_t)max_payload);
    ipc_bytes version = ipc_frame_bytes(welcome, IPC_TAG_DAEMON_VERSION);
    size_t length = version.length < sizeof client->daemon_version ? version.length : sizeof client->daemon_version - 1;
    if (length)
        memcpy(client->daemon_version, version.data, length);
    client->daemon_version[length] = '\0';
    client->link_state = (int)ipc_frame_uint(welcome, IPC_TAG_LINK_STATE);
    return 0;
}

static int say_hello(imagent_client *client, int64_t deadline)
{
    ipc_request hello = {.op = IPC_OP_HELLO, .reply_op = IPC_OP_WELCOME, .client_name = client->client_name};
    int result = request_exchange(client, &hello, deadline);
    return result < 0 ? result : take_welcome(client);
}

int track_opened(imagent_client *client, uint64_t expected_id)
{
    const ipc_frame *opened = &client->reply.frame;
    uint64_t id = ipc_frame_uint(opened, IPC_TAG_SESSION);
    if (!ipc_frame_has(opened, IPC_TAG_SESSION) || id == 0 || (expected_id != 0 && id != expected_id))
        return IMAGENT_ERR_PROTOCOL;
    session_state *session = session_track(&client->sessions, id);
    if (!session)
        return IMAGENT_ERR_NO_MEMORY;
    uint64_t ack_again = session_attached(session, ipc_frame_uint(opened, IPC_TAG_SENT_SEQ),
                                          ipc_frame_uint(opened, IPC_TAG_DELIVERED_SEQ));
    if (ack_again)
        request_queue_ack(client, id, ack_again);
    return 0;
}

/* Whether a re-attach's answer means the session is gone for good. */
static bool session_is_gone(int result)
{
    return result == IMAGENT_ERR_SESSION_CLOSED || result == IMAGENT_ERR_UNKNOWN_SESSION ||
           result == IMAGENT_ERR_PERMISSION_DENIED;
}

static int reattach_session(imagent_client *client, uint64_t id, int64_t deadline)
{
    ipc_request open = {.op = IPC_OP_OPEN, .reply_op = IPC_OP_OPENED, .session = id};
    int result = request_exchange(client, &open, deadline);
    if (result == 0)
        result = track_opened(client, id);
    if (session_is_gone(result)) {
        /* Tell the program and stop tracking it. */
        session_forget(&client->sessions, id);
        imagent_event event = {
            .type = IMAGENT_EVENT_SESSION_STATE, .session = id, .state = IMAGENT_SESSION_CLOSED, .code = result};
        emit_event(client, &event);
        return 0;
    }
    /* Any other error (SESSION_BUSY while the old connection lingers, ...)
     * fails this attempt; ensure_connected() tries again later. */
    return result;
}

/* Attaches every tracked session again on a fresh connection. The ids are
 * copied first: events read meanwhile may remove sessions from the table. */
static int reattach_sessions(imagent_client *client, int64_t deadline)
{
    size_t count = client->sessions.count;
    if (count == 0)
        return 0;
    uint64_t *ids = calloc(count, sizeof *ids);
    if (!ids)
        return IMAGENT_ERR_NO_MEMORY;
    for (size_t i = 0; i < count; i++)
        ids[i] = client->sessions.items[i].id;
    int result = 0;
    for (size_t i = 0; i < count && result == 0; i++)
        if (session_find(&client->sessions, ids[i]))
            result = reattach_session(client, ids[i], deadline);
    free(ids);
    return result;
}

int connect_once(imagent_client *client, int64_t deadline)
{
    int result = connection_open(&client->conn, client->socket_path);
    if (result < 0)
        return result;
    client->connecting = true;
    set_max_payload(client, DEFAULT_MAX_PAYLOAD);
    int64_t handshake_deadline = deadline;
    if (deadline != DEADLINE_NEVER && deadline < monotonic_ms() + HANDSHAKE_MIN_MS)
        handshake_deadline = monotonic_ms() + HANDSHAKE_MIN_MS;
    result = say_hello(client, handshake_deadline);
    if (result == 0)
        result = reattach_sessions(client, handshake_deadline);
    request_release_reply(client);
    if (result < 0)
        drop_connection(client);
    client->connecting = false;
    if (result < 0)
        return result;
    if (client->was_connected) {
        imagent_event event = {.type = IMAGENT_EVENT_RECONNECTED, .state = client->link_state};
        emit_event(client, &event);
    }
    client->was_connected = true;
    backoff_after_success(&client->backoff);
    return 0;
}

/* Whether a failed attempt may succeed later. A restarting daemon can refuse,
 * time out, say SHUTTING_DOWN, or briefly have its socket with the wrong mode
 * (PERMISSION_DENIED); these cannot change by waiting. */
static bool worth_retrying(int result)
{
    return result != IMAGENT_ERR_VERSION_UNSUPPORTED && result != IMAGENT_ERR_BAD_REQUEST &&
           result != IMAGENT_ERR_INVALID_ARGUMENT && result != IMAGENT_ERR_NO_MEMORY;
}

int ensure_connected(imagent_client *client, int64_t deadline)
{
    while (client->conn.fd < 0) {
        int64_t next_attempt = client->backoff.next_attempt_ms;
        if (next_attempt > monotonic_ms()) {
            if (deadline != DEADLINE_NEVER && deadline < next_attempt) {
                sleep_until(deadline);
                return IMAGENT_ERR_UNAVAILABLE;
            }
            sleep_until(next_attempt);
        }
        int result = connect_once(client, deadline);
        if (result == 0)
            return 0;
        if (!worth_retrying(result))
            return result;
        backoff_after_failure(&client->backoff, monotonic_ms());
        if (deadline != DEADLINE_NEVER && monotonic_ms() >= deadline)
            return IMAGENT_ERR_UNAVAILABLE;
    }
    return 0;
}
