/*
 * client.c - the public calls: each checks its arguments, turns the handle's
 * timeout into a deadline, and asks requests.c, reconnect.c and sessions.c
 * for the rest. The daemon's messages and events arrive through incoming.c
 * during whichever call reads them.
 */
#include <stdlib.h>
#include <string.h>

#include "client_state.h"
#include "deadline.h"
#include "imagent.h"
#include "incoming.h"
#include "ipc_frame.h"
#include "reconnect.h"
#include "requests.h"
#include "socket_path.h"

#define DEFAULT_TIMEOUT_MS 30000
#define SERVICE_LIMIT 255

/* ---- the handle ---------------------------------------------------------- */

int imagent_connect(imagent_client **out, const char *socket_path, const char *client_name)
{
    if (!out)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    *out = NULL;
    size_t name_length = client_name ? strlen(client_name) : 0;
    if (client_name && !ipc_utf8_valid(client_name, name_length))
        return IMAGENT_ERR_INVALID_ARGUMENT;
    imagent_client *client = calloc(1, sizeof *client);
    if (!client)
        return IMAGENT_ERR_NO_MEMORY;
    connection_init(&client->conn);
    client->timeout_ms = DEFAULT_TIMEOUT_MS;
    client->max_payload = DEFAULT_MAX_PAYLOAD;
    if (client_name) {
        size_t length = ipc_utf8_prefix_length(client_name, name_length, CLIENT_NAME_LIMIT);
        memcpy(client->client_name, client_name, length);
        client->client_name[length] = '\0';
    }
    int result = imagent_resolve_socket_path(socket_path, &client->socket_path);
    if (result == 0)
        result = connect_once(client, deadline_after(client->timeout_ms));
    if (result < 0) {
        imagent_free(client);
        return result;
    }
    *out = client;
    return 0;
}

void imagent_free(imagent_client *client)
{
    if (!client)
        return;
    client->callback = NULL; /* no events from inside free */
    drop_connection(client);
    request_release_reply(client);
    connection_free(&client->conn);
    /* Messages the program still holds are separate allocations: they stay
     * valid until imagent_message_release(). */
    message_queue_clear(&client->queue);
    session_table_free(&client->sessions);
    free(client->socket_path);
    free(client);
}

int imagent_set_timeout(imagent_client *client, int timeout_ms)
{
    if (!client || timeout_ms < -1)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    client->timeout_ms = timeout_ms;
    return 0;
}

const char *imagent_daemon_version(const imagent_client *client)
{
    return client ? client->daemon_version : "";
}

uint32_t imagent_max_payload(const imagent_client *client)
{
    return client ? client->max_payload : 0;
}

int imagent_link_state(const imagent_client *client)
{
    return client ? client->link_state : IMAGENT_ERR_INVALID_ARGUMENT;
}

int imagent_set_event_callback(imagent_client *client, imagent_event_callback callback, void *user_data)
{
    if (!client)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    client->callback = callback;
    client->callback_data = user_data;
    return 0;
}

/* ---- sessions ------------------------------------------------------------ */

int imagent_open_ex(imagent_client *client, const char *service, int priority, int durable, uint64_t *session_id)
{
    if (!client || !service || !session_id || priority < 0 || priority > 2 || durable < 0 || durable > 1)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    size_t length = strlen(service);
    if (length == 0 || length > SERVICE_LIMIT || !ipc_utf8_valid(service, length))
        return IMAGENT_ERR_INVALID_ARGUMENT;
    ipc_request open = {.op = IPC_OP_OPEN, .reply_op = IPC_OP_OPENED, .service = service, .service_length = length,
                        .priority = (uint8_t)priority, .durable = (uint8_t)durable};
    /* A retry after a lost connection may leave the first attempt's session
     * behind, unattached (see imagent_open(3)). */
    int result = request_until_answered(client, &open, deadline_after(client->timeout_ms), NULL, NULL);
    if (result == 0)
        result = track_opened(client, 0);
    if (result == 0)
        *session_id = ipc_frame_uint(&client->reply.frame, IPC_TAG_SESSION);
    request_release_reply(client);
    return result;
}

int imagent_open(imagent_client *client, const char *service, uint64_t *session_id)
{
    return imagent_open_ex(client, service, IMAGENT_PRIORITY_NORMAL, 1, session_id);
}

/* Tracked sessions were attached by ensure_connected() already. */
static bool already_attached(imagent_client *client, const ipc_request *request, void *context)
{
    (void)context;
    return session_find(&client->sessions, request->session) != NULL;
}

int imagent_attach(imagent_client *client, uint64_t session_id)
{
    if (!client || session_id == 0)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    ipc_request open = {.op = IPC_OP_OPEN, .reply_op = IPC_OP_OPENED, .session = session_id};
    int result = request_until_answered(client, &open, deadline_after(client->timeout_ms), already_attached, NULL);
    if (result == REQUEST_SETTLED)
        return 0;
    if (result == 0)
        result = track_opened(client, session_id);
    request_release_reply(client);
    return result;
}

/* Re-attaching found the session closed: a CLOSE in flight did it. */
static bool closed_in_flight(imagent_client *client, const ipc_request *request, void *was_tracked)
{
    return request->op == IPC_OP_CLOSE && *(bool *)was_tracked && !session_find(&client->sessions, request->session);
}

/* CLOSE or DETACH: the session is no longer tracked once the daemon agrees. */
static int end_session(imagent_client *client, uint16_t op, uint64_t session_id)
{
    if (!client || session_id == 0)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    bool was_tracked = session_find(&client->sessions, session_id) != NULL;
    ipc_request end = {.op = op, .reply_op = IPC_OP_OK, .session = session_id};
    int64_t deadline = deadline_after(client->timeout_ms);
    int result = request_until_answered(client, &end, deadline, closed_in_flight, &was_tracked);
    if (result == REQUEST_SETTLED)
        return 0;
    request_release_reply(client);
    if (result == 0 || result == IMAGENT_ERR_SESSION_CLOSED || result == IMAGENT_ERR_UNKNOWN_SESSION)
        session_forget(&client->sessions, session_id);
    return result;
}

int imagent_close(imagent_client *client, uint64_t session_id)
{
    return end_session(client, IPC_OP_CLOSE, session_id);
}

int imagent_detach(imagent_client *client, uint64_t session_id)
{
    return end_session(client, IPC_OP_DETACH, session_id);
}

/* ---- sending ------------------------------------------------------------- */

/* What a SEND lost with its connection turned out to be. */
#define SEND_AGAIN 1

/* A SEND lost with its connection may have been stored: re-attaching tells
 * from SENT_SEQ (sessions.h). 0 (stored as accepted_before + 1, put in *seq),
 * SEND_AGAIN (not stored), or a negative code. */
static int resolve_lost_send(imagent_client *client, uint64_t session_id, uint64_t accepted_before, int64_t deadline,
                             uint64_t *seq)
{
    int result = ensure_connected(client, deadline);
    if (result < 0)
        return result;
    session_state *session = session_find(&client->sessions, session_id);
    if (!session)
        return IMAGENT_ERR_SESSION_CLOSED;
    if (!session_send_was_stored(session, accepted_before))
        return SEND_AGAIN;
    if (seq)
        *seq = accepted_before + 1;
    return 0;
}

int imagent_send_ttl(imagent_client *client, uint64_t session_id, const void *payload, size_t length,
                     uint32_t ttl_ms, uint64_t *seq)
{
    if (!client || session_id == 0 || (!payload && length > 0))
        return IMAGENT_ERR_INVALID_ARGUMENT;
    ipc_request send = {.op = IPC_OP_SEND, .reply_op = IPC_OP_ACCEPTED, .session = session_id,
                        .has_payload = true, .payload = payload, .payload_length = length, .ttl_ms = ttl_ms};
    int64_t deadline = deadline_after(client->timeout_ms);
    for (;;) {
        int result = ensure_connected(client, deadline);
        if (result < 0)
            return result;
        /* Checked against what this daemon accepts before anything is
         * buffered (length is a size_t, MAX_PAYLOAD a uint32_t). */
        if (length > client->max_payload)
            return IMAGENT_ERR_PAYLOAD_TOO_LARGE;
        session_state *session = session_find(&client->sessions, session_id);
        bool tracked = session != NULL;
        uint64_t accepted_before = tracked ? session->accepted_seq : 0;

        result = request_exchange(client, &send, deadline);
        if (result == 0) {
            uint64_t accepted = ipc_frame_uint(&client->reply.frame, IPC_TAG_SEQ);
            session_accepted(session_find(&client->sessions, session_id), accepted);
            if (seq)
                *seq = accepted;
        }
        request_release_reply(client);
        if (result == IMAGENT_ERR_SHUTTING_DOWN) {
            drop_connection(client); /* refused, so not stored: send again */
            continue;
        }
        if (result == IMAGENT_ERR_TIMEDOUT) {
            /* The SEND may still be stored. Dropping the connection means
             * the next call resolves it from SENT_SEQ, so no later send can
             * take this one's ACCEPTED for its own. */
            drop_connection(client);
            return result;
        }
        if (result != CONNECTION_LOST)
            return result;
        /* Only a tracked session has a SENT_SEQ to tell from. */
        if (!tracked)
            return IMAGENT_ERR_OUTCOME_UNKNOWN;
        result = resolve_lost_send(client, session_id, accepted_before, deadline, seq);
        if (result != SEND_AGAIN)
            return result;
    }
}

int imagent_send(imagent_client *client, uint64_t session_id, const void *payload, size_t length, uint64_t *seq)
{
    return imagent_send_ttl(client, session_id, payload, length, 0, seq);
}

/* ---- receiving and the event loop ---------------------------------------- */

/* After an overflow: once the program has taken every queued message,
 * reconnect so the daemon delivers the dropped ones again. */
static void resync_if_drained(imagent_client *client)
{
    if (!client->resync_needed || client->queue.count > 0)
        return;
    client->resync_needed = false;
    drop_connection(client);
}

/* Writes pending acks and reads what is there, for the queue. */
static int exchange_available(imagent_client *client)
{
    int result = flush_output(client);
    return result < 0 ? result : incoming_read(client, READ_FOR_MESSAGES);
}

int imagent_receive(imagent_client *client, imagent_message *message, int timeout_ms)
{
    if (!client || !message)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    memset(message, 0, sizeof *message);
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        queued_message *node = message_queue_pop(&client->queue);
        if (node) {
            /* The node is the message's one allocation: the program owns it
             * now, and imagent_message_release() frees it. */
            *message = (imagent_message){.session = node->session, .seq = node->seq, .payload = node->payload,
                                         .length = node->length, .internal = node};
            return 0;
        }
        resync_if_drained(client);
        int result = ensure_connected(client, deadline);
        /* A poll asks "anything now?": nothing, whether or not the daemon is
         * reachable (IMAGENT_EVENT_DISCONNECTED says that). */
        if (result == IMAGENT_ERR_UNAVAILABLE && timeout_ms == 0)
            return IMAGENT_ERR_TIMEDOUT;
        if (result < 0)
            return result;
        result = exchange_available(client);
        if (result == CONNECTION_LOST)
            continue;
        if (result < 0)
            return result;
        if (client->queue.count > 0)
            continue;
        int timeout = deadline_poll_timeout(deadline);
        if (timeout == 0)
            return IMAGENT_ERR_TIMEDOUT;
        if (connection_wait(&client->conn, timeout) < 0)
            return IMAGENT_ERR_SYSTEM;
    }
}

void imagent_message_release(imagent_message *message)
{
    if (!message)
        return;
    free(message->internal);
    /* Cleared, so releasing the same message again frees nothing. */
    memset(message, 0, sizeof *message);
}

int imagent_ack(imagent_client *client, uint64_t session_id, uint64_t seq)
{
    if (!client || session_id == 0)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    session_state *session = session_find(&client->sessions, session_id);
    session_acknowledged(session, seq);
    if (client->conn.fd < 0)
        return session ? 0 : IMAGENT_ERR_UNAVAILABLE; /* tracked: re-sent after re-attaching */
    request_queue_ack(client, session_id, seq);
    int result = flush_output(client);
    if (result == CONNECTION_LOST && session)
        return 0;
    return result;
}

int imagent_fd(const imagent_client *client)
{
    return client ? client->conn.fd : -1;
}

int imagent_process(imagent_client *client)
{
    if (!client)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    resync_if_drained(client);
    int result = 0;
    /* Twice: a connection found lost in the first round is made again once. */
    for (int round = 0; round < 2; round++) {
        if (client->conn.fd < 0) {
            if (client->backoff.next_attempt_ms > monotonic_ms())
                return IMAGENT_ERR_UNAVAILABLE;
            result = ensure_connected(client, monotonic_ms());
            if (result < 0)
                return result;
        }
        result = exchange_available(client);
        if (result != CONNECTION_LOST)
            return result;
    }
    return result;
}

/* ---- daemon queries ------------------------------------------------------ */

/* A request that carries nothing, answered by reply_op; repeated across
 * reconnects. On 0 the reply is held: the caller releases it. */
static int ask(imagent_client *client, uint16_t op, uint16_t reply_op)
{
    ipc_request request = {.op = op, .reply_op = reply_op};
    return request_until_answered(client, &request, deadline_after(client->timeout_ms), NULL, NULL);
}

/* STATUS, SESSIONS, METRICS: RESULT's JSON as a NUL-terminated string. */
static int query_json(imagent_client *client, uint16_t op, char **json)
{
    if (!client || !json)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    *json = NULL;
    int result = ask(client, op, IPC_OP_RESULT);
    if (result == 0) {
        /* text.length is below the frame limit (16 MiB + 64 KiB): + 1 cannot
         * overflow a size_t. */
        ipc_bytes text = ipc_frame_bytes(&client->reply.frame, IPC_TAG_JSON);
        *json = malloc((size_t)text.length + 1);
        if (!*json) {
            result = IMAGENT_ERR_NO_MEMORY;
        } else {
            if (text.length)
                memcpy(*json, text.data, text.length);
            (*json)[text.length] = '\0';
        }
    }
    request_release_reply(client);
    return result;
}

int imagent_status(imagent_client *client, char **json)
{
    return query_json(client, IPC_OP_STATUS, json);
}

int imagent_sessions(imagent_client *client, char **json)
{
    return query_json(client, IPC_OP_SESSIONS, json);
}

int imagent_metrics(imagent_client *client, char **json)
{
    return query_json(client, IPC_OP_METRICS, json);
}

int imagent_ping(imagent_client *client)
{
    if (!client)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    int result = ask(client, IPC_OP_PING, IPC_OP_PONG);
    request_release_reply(client);
    return result;
}
