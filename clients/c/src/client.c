/*
 * client.c - the client handle and its sessions: requests and replies,
 * received messages and events, and surviving the daemon (reconnect,
 * re-attach, in-flight send resolution, redelivery filtering).
 *
 * Only one request is outstanding at a time (calls on a handle do not
 * overlap), so a blocking call writes its request and reads frames until the
 * reply with its id arrives; events and messages read on the way are
 * dispatched (callback) or queued (imagent_receive()).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client_internal.h"
#include "errors.h"
#include "imagent.h"
#include "ipc_frame.h"
#include "message_queue.h"
#include "socket_path.h"

#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_MAX_PAYLOAD 1048576u /* until WELCOME says otherwise */
#define CLIENT_NAME_LIMIT 128
#define SERVICE_LIMIT 255
#define READ_CHUNK 65536
/* A handshake started by a polling call (timeout 0) gets this long to finish,
 * or no reconnect could ever succeed from an event loop. */
#define HANDSHAKE_MIN_MS 1000
#define FOREVER INT64_MAX

/* A session this handle has attached. */
typedef struct session {
    uint64_t id;
    uint64_t accepted_seq; /* highest outbound seq seen ACCEPTED, or OPENED's SENT_SEQ */
    uint64_t handed_seq;   /* highest inbound seq queued for the program */
    uint64_t acked_seq;    /* highest inbound seq the program acknowledged */
    bool overflowed;       /* a message was dropped for room: drop later ones until re-attached */
} session;

struct imagent_client {
    char *socket_path;
    char client_name[CLIENT_NAME_LIMIT + 1];
    int fd; /* -1 while disconnected */
    bool was_connected;
    int timeout_ms;
    uint32_t max_payload;
    char daemon_version[64];
    int link_state;

    uint32_t last_request;
    uint32_t awaited_request; /* 0: none */
    bool connecting;          /* inside connect_once(): no DISCONNECTED, no backoff reset */
    bool awaiting_welcome;    /* an ERROR with request 0 answers HELLO */
    uint8_t *reply_bytes;     /* a copy of the awaited reply frame */
    ipc_frame reply;          /* decoded from reply_bytes */

    ipc_buffer in;  /* bytes read and not yet decoded */
    ipc_buffer out; /* frames not yet written */

    session *sessions;
    size_t session_count;
    size_t session_capacity;

    message_queue queue;
    bool resync_needed; /* some session overflowed: reconnect once the queue is empty */

    unsigned reconnect_attempt;
    int64_t next_reconnect_ms;

    imagent_event_callback callback;
    void *callback_data;
};

/* Internal outcome of reading: the connection is gone (already closed). */
#define CONNECTION_LOST IMAGENT_ERR_UNAVAILABLE

int imagent_reconnect_delay_ms(unsigned attempt)
{
    if (attempt <= 1)
        return 0;
    if (attempt >= 7)
        return 1000;
    return 50 << (attempt - 2);
}

static int64_t now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static int64_t deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? FOREVER : now_ms() + timeout_ms;
}

/* What poll() should wait for until deadline: -1 for ever, else 0..INT_MAX. */
static int poll_timeout(int64_t deadline)
{
    if (deadline == FOREVER)
        return -1;
    int64_t left = deadline - now_ms();
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

static void sleep_until(int64_t when)
{
    int64_t left = when - now_ms();
    if (left <= 0)
        return;
    struct timespec pause = {.tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000};
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR) {
    }
}

static void emit(imagent_client *client, const imagent_event *event)
{
    if (client->callback)
        client->callback(event, client->callback_data);
}

/* ---- sessions ---------------------------------------------------------- */

static session *find_session(imagent_client *client, uint64_t id)
{
    for (size_t i = 0; i < client->session_count; i++)
        if (client->sessions[i].id == id)
            return &client->sessions[i];
    return NULL;
}

static session *add_session(imagent_client *client, uint64_t id)
{
    session *existing = find_session(client, id);
    if (existing)
        return existing;
    if (client->session_count == client->session_capacity) {
        size_t capacity = client->session_capacity ? client->session_capacity * 2 : 8;
        session *grown = realloc(client->sessions, capacity * sizeof *grown);
        if (!grown)
            return NULL;
        client->sessions = grown;
        client->session_capacity = capacity;
    }
    session *added = &client->sessions[client->session_count++];
    memset(added, 0, sizeof *added);
    added->id = id;
    return added;
}

static void remove_session(imagent_client *client, uint64_t id)
{
    session *found = find_session(client, id);
    if (!found)
        return;
    *found = client->sessions[--client->session_count];
}

/* ---- the connection ---------------------------------------------------- */

static void clear_reply(imagent_client *client)
{
    free(client->reply_bytes);
    client->reply_bytes = NULL;
    client->awaited_request = 0;
}

static void drop_connection(imagent_client *client)
{
    if (client->fd < 0)
        return;
    close(client->fd);
    client->fd = -1;
    /* Unwritten frames die with the connection: requests are retried by their
     * callers, acks are re-sent after re-attaching (acked_seq). */
    client->in.length = 0;
    client->out.length = 0;
    clear_reply(client);
    if (client->connecting)
        return; /* a failed attempt: ensure_connected() backs off */
    /* An established connection was lost: the first attempt goes at once. */
    client->reconnect_attempt = 0;
    client->next_reconnect_ms = now_ms();
    if (client->was_connected) {
        imagent_event event = {.type = IMAGENT_EVENT_DISCONNECTED};
        emit(client, &event);
    }
}

static uint32_t max_frame_length(const imagent_client *client)
{
    return client->max_payload + IPC_FRAME_OVERHEAD;
}

static bool queue_below(const imagent_client *client, size_t messages, size_t bytes)
{
    return client->queue.count < messages && client->queue.bytes < bytes;
}

static int ipc_error_code(const ipc_frame *frame)
{
    return imagent_code_from_ipc(ipc_frame_uint(frame, IPC_TAG_CODE));
}

/* The MESSAGE record as NUL-terminated text, into a small buffer. */
static const char *message_text(const ipc_frame *frame, char *text, size_t size)
{
    ipc_bytes bytes = ipc_frame_bytes(frame, IPC_TAG_MESSAGE);
    if (!bytes.data)
        return NULL;
    size_t length = bytes.length < size - 1 ? bytes.length : size - 1;
    memcpy(text, bytes.data, length);
    text[length] = '\0';
    return text;
}

static int dispatch_message(imagent_client *client, const ipc_frame *frame)
{
    if (!ipc_frame_has(frame, IPC_TAG_SESSION) || !ipc_frame_has(frame, IPC_TAG_SEQ) ||
        !ipc_frame_has(frame, IPC_TAG_PAYLOAD))
        return IMAGENT_ERR_PROTOCOL;
    uint64_t id = ipc_frame_uint(frame, IPC_TAG_SESSION);
    uint64_t seq = ipc_frame_uint(frame, IPC_TAG_SEQ);
    ipc_bytes payload = ipc_frame_bytes(frame, IPC_TAG_PAYLOAD);
    session *target = find_session(client, id);
    if (target) {
        /* Redelivered after a re-attach: the program has it already. */
        if (seq <= target->handed_seq)
            return 0;
        /* After a drop, later messages must wait too, or order would break. */
        if (target->overflowed)
            return 0;
        if (!queue_below(client, IMAGENT_QUEUE_HARD_MESSAGES, IMAGENT_QUEUE_HARD_BYTES)) {
            target->overflowed = true;
            client->resync_needed = true;
            return 0;
        }
    }
    int queued = message_queue_push(&client->queue, id, seq, payload.data, payload.length);
    if (queued < 0)
        return queued;
    if (target)
        target->handed_seq = seq;
    return 0;
}

static int dispatch_event(imagent_client *client, const ipc_frame *frame)
{
    char text[512];
    imagent_event event = {0};
    event.session = ipc_frame_uint(frame, IPC_TAG_SESSION);
    event.seq = ipc_frame_uint(frame, IPC_TAG_SEQ);
    event.message = message_text(frame, text, sizeof text);
    if (ipc_frame_has(frame, IPC_TAG_CODE))
        event.code = ipc_error_code(frame);
    switch (frame->op) {
    case IPC_OP_EVENT_MESSAGE:
        return dispatch_message(client, frame);
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
            remove_session(client, event.session);
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
    emit(client, &event);
    return 0;
}

static bool is_reply_op(uint16_t op)
{
    return (op >= IPC_OP_OK && op <= 0x807F) || op == IPC_OP_ERROR;
}

static int dispatch_frame(imagent_client *client, const uint8_t *bytes, size_t size, const ipc_frame *frame)
{
    bool answers_hello = client->awaiting_welcome && frame->op == IPC_OP_ERROR && frame->request == 0;
    if (is_reply_op(frame->op) && client->awaited_request != 0 &&
        (frame->request == client->awaited_request || answers_hello)) {
        /* Keep the reply: the read buffer moves on. */
        client->reply_bytes = malloc(size);
        if (!client->reply_bytes)
            return IMAGENT_ERR_NO_MEMORY;
        memcpy(client->reply_bytes, bytes, size);
        size_t consumed;
        ipc_frame_decode(client->reply_bytes, size, UINT32_MAX, &client->reply, &consumed);
        client->awaited_request = 0;
        return 0;
    }
    if (frame->request != 0) {
        /* A late reply to a request given up on: an ACCEPTED still counts. */
        if (frame->op == IPC_OP_ACCEPTED) {
            session *target = find_session(client, ipc_frame_uint(frame, IPC_TAG_SESSION));
            uint64_t seq = ipc_frame_uint(frame, IPC_TAG_SEQ);
            if (target && seq > target->accepted_seq)
                target->accepted_seq = seq;
        }
        return 0;
    }
    return dispatch_event(client, frame);
}

/* Decodes the frames buffered so far: all of them when a reply is awaited,
 * else while the queue has room. */
static int decode_buffered(imagent_client *client, bool for_reply)
{
    size_t offset = 0;
    int result = 0;
    while (offset < client->in.length) {
        if (for_reply ? client->reply_bytes != NULL
                      : !queue_below(client, IMAGENT_QUEUE_SOFT_MESSAGES, IMAGENT_QUEUE_SOFT_BYTES))
            break;
        ipc_frame frame;
        size_t consumed = 0;
        int decoded = ipc_frame_decode(client->in.data + offset, client->in.length - offset,
                                       max_frame_length(client), &frame, &consumed);
        if (decoded == IPC_NEED_MORE)
            break;
        if (decoded < 0) {
            result = IMAGENT_ERR_PROTOCOL;
            break;
        }
        result = dispatch_frame(client, client->in.data + offset, consumed, &frame);
        offset += consumed;
        if (result < 0)
            break;
    }
    ipc_buffer_consume(&client->in, offset);
    return result;
}

/* Makes room for the next read: the whole next frame when its length is
 * known (checked against the limit before anything is allocated), else a
 * chunk. */
static int reserve_for_read(imagent_client *client)
{
    size_t frame_size = 0;
    int sized = ipc_frame_size(client->in.data, client->in.length, max_frame_length(client), &frame_size);
    if (sized < 0)
        return IMAGENT_ERR_PROTOCOL;
    size_t wanted = READ_CHUNK;
    if (sized == IPC_DECODED && frame_size > client->in.length && frame_size - client->in.length > wanted)
        wanted = frame_size - client->in.length;
    return ipc_buffer_reserve(&client->in, wanted) ? 0 : IMAGENT_ERR_NO_MEMORY;
}

/* Reads what the socket has without blocking and decodes it. Returns 0,
 * CONNECTION_LOST (the connection is closed now), or another negative code
 * (the connection is closed too: it cannot be trusted after it). */
static int read_available(imagent_client *client, bool for_reply)
{
    for (;;) {
        int result = decode_buffered(client, for_reply);
        if (result < 0) {
            drop_connection(client);
            return result;
        }
        if (for_reply ? client->reply_bytes != NULL
                      : !queue_below(client, IMAGENT_QUEUE_SOFT_MESSAGES, IMAGENT_QUEUE_SOFT_BYTES))
            return 0;
        if (client->fd < 0)
            return CONNECTION_LOST;
        result = reserve_for_read(client);
        if (result < 0) {
            drop_connection(client);
            return result;
        }
        ssize_t got = recv(client->fd, client->in.data + client->in.length, client->in.capacity - client->in.length,
                           MSG_DONTWAIT);
        if (got > 0) {
            client->in.length += (size_t)got;
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        drop_connection(client); /* end of file, or a reset */
        return CONNECTION_LOST;
    }
}

/* Writes what it can of the pending frames without blocking. */
static int write_available(imagent_client *client)
{
    while (client->out.length > 0) {
        ssize_t sent = send(client->fd, client->out.data, client->out.length, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent > 0) {
            ipc_buffer_consume(&client->out, (size_t)sent);
            continue;
        }
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        drop_connection(client);
        return CONNECTION_LOST;
    }
    return 0;
}

/* Writes the pending frames and reads until the reply to `request` is in
 * client->reply. While writing it reads too: a daemon that cannot write to us
 * may stop reading from us. */
static int await_reply(imagent_client *client, uint32_t request, int64_t deadline)
{
    client->awaited_request = request;
    for (;;) {
        if (client->fd < 0)
            return CONNECTION_LOST;
        int result = write_available(client);
        if (result < 0)
            return result;
        result = read_available(client, true);
        if (result < 0)
            return result;
        if (client->reply_bytes)
            return 0;
        /* Checked here, not from poll(): a stream of events would keep the
         * socket readable past the deadline. */
        int timeout = poll_timeout(deadline);
        if (timeout == 0) {
            client->awaited_request = 0;
            return IMAGENT_ERR_TIMEDOUT;
        }
        struct pollfd watched = {.fd = client->fd, .events = POLLIN};
        if (client->out.length > 0)
            watched.events |= POLLOUT;
        if (poll(&watched, 1, timeout) < 0 && errno != EINTR) {
            drop_connection(client);
            return CONNECTION_LOST;
        }
    }
}

static uint32_t begin_request(imagent_client *client, uint16_t op)
{
    /* Never 0: request 0 means "no reply" (ACK) and marks events. */
    if (++client->last_request == 0)
        client->last_request = 1;
    ipc_frame_begin(&client->out, op, client->last_request);
    return client->last_request;
}

/* Ends the request being built and waits for its reply. The reply is in
 * client->reply until the next request (clear_reply). */
static int finish_request(imagent_client *client, uint32_t request, int64_t deadline)
{
    clear_reply(client);
    if (!ipc_frame_end(&client->out))
        return IMAGENT_ERR_NO_MEMORY;
    return await_reply(client, request, deadline);
}

/* The reply as a result: 0 for the expected op, the error's code for ERROR,
 * IMAGENT_ERR_PROTOCOL for anything else. */
static int reply_result(const imagent_client *client, uint16_t expected_op)
{
    if (client->reply.op == expected_op)
        return 0;
    if (client->reply.op == IPC_OP_ERROR)
        return ipc_error_code(&client->reply);
    return IMAGENT_ERR_PROTOCOL;
}

static int send_hello(imagent_client *client, int64_t deadline)
{
    uint32_t request = begin_request(client, IPC_OP_HELLO);
    ipc_put_u8(&client->out, IPC_TAG_IPC_VERSION, 1);
    if (client->client_name[0])
        ipc_put_bytes(&client->out, IPC_TAG_CLIENT_NAME, client->client_name, strlen(client->client_name));
    client->awaiting_welcome = true;
    int result = finish_request(client, request, deadline);
    client->awaiting_welcome = false;
    if (result < 0)
        return result;
    result = reply_result(client, IPC_OP_WELCOME);
    if (result < 0)
        return result;
    const ipc_frame *welcome = &client->reply;
    if (ipc_frame_has(welcome, IPC_TAG_IPC_VERSION) && ipc_frame_uint(welcome, IPC_TAG_IPC_VERSION) != 1)
        return IMAGENT_ERR_VERSION_UNSUPPORTED;
    uint64_t max_payload = ipc_frame_uint(welcome, IPC_TAG_MAX_PAYLOAD);
    if (!ipc_frame_has(welcome, IPC_TAG_MAX_PAYLOAD) || max_payload == 0)
        return IMAGENT_ERR_PROTOCOL;
    /* A daemon announcing more than we are willing to buffer still gets our
     * sane cap: we send no more, and refuse frames beyond it. */
    client->max_payload = max_payload > IMAGENT_MAX_PAYLOAD_CAP ? IMAGENT_MAX_PAYLOAD_CAP : (uint32_t)max_payload;
    ipc_bytes version = ipc_frame_bytes(welcome, IPC_TAG_DAEMON_VERSION);
    size_t length = version.length < sizeof client->daemon_version ? version.length : sizeof client->daemon_version - 1;
    if (length)
        memcpy(client->daemon_version, version.data, length);
    client->daemon_version[length] = '\0';
    client->link_state = (int)ipc_frame_uint(welcome, IPC_TAG_LINK_STATE);
    return 0;
}

static void queue_ack(imagent_client *client, uint64_t id, uint64_t seq)
{
    ipc_frame_begin(&client->out, IPC_OP_ACK, 0);
    ipc_put_u64(&client->out, IPC_TAG_SESSION, id);
    ipc_put_u64(&client->out, IPC_TAG_SEQ, seq);
    ipc_frame_end(&client->out); /* on failure the ack waits for the next re-attach */
}

/* Takes in an OPENED for session `id`; the session is tracked from now on. */
static int take_opened(imagent_client *client, uint64_t id)
{
    const ipc_frame *opened = &client->reply;
    if (!ipc_frame_has(opened, IPC_TAG_SESSION) || ipc_frame_uint(opened, IPC_TAG_SESSION) == 0)
        return IMAGENT_ERR_PROTOCOL;
    if (id != 0 && ipc_frame_uint(opened, IPC_TAG_SESSION) != id)
        return IMAGENT_ERR_PROTOCOL;
    bool known = find_session(client, ipc_frame_uint(opened, IPC_TAG_SESSION)) != NULL;
    session *attached = add_session(client, ipc_frame_uint(opened, IPC_TAG_SESSION));
    if (!attached)
        return IMAGENT_ERR_NO_MEMORY;
    uint64_t sent_seq = ipc_frame_uint(opened, IPC_TAG_SENT_SEQ);
    uint64_t delivered_seq = ipc_frame_uint(opened, IPC_TAG_DELIVERED_SEQ);
    /* SENT_SEQ counts every message that will ever be ACCEPTED, also one
     * whose ACCEPTED was lost with the connection. */
    if (!known || sent_seq > attached->accepted_seq)
        attached->accepted_seq = sent_seq;
    if (!known || delivered_seq > attached->handed_seq)
        attached->handed_seq = delivered_seq;
    if (!known || delivered_seq > attached->acked_seq)
        attached->acked_seq = delivered_seq;
    /* An ack lost with the old connection: say it again, or the daemon would
     * deliver those messages again after every attach. */
    if (attached->acked_seq > delivered_seq)
        queue_ack(client, attached->id, attached->acked_seq);
    attached->overflowed = false;
    return 0;
}

/* Attaches every tracked session again on a fresh connection. The ids are
 * copied first: events read meanwhile may remove sessions from the table. */
static int reattach_sessions(imagent_client *client, int64_t deadline)
{
    size_t count = client->session_count;
    if (count == 0)
        return 0;
    uint64_t *ids = malloc(count * sizeof *ids);
    if (!ids)
        return IMAGENT_ERR_NO_MEMORY;
    for (size_t i = 0; i < count; i++)
        ids[i] = client->sessions[i].id;
    int result = 0;
    for (size_t i = 0; i < count && result == 0; i++) {
        if (!find_session(client, ids[i]))
            continue;
        uint32_t request = begin_request(client, IPC_OP_OPEN);
        ipc_put_u64(&client->out, IPC_TAG_SESSION, ids[i]);
        result = finish_request(client, request, deadline);
        if (result < 0)
            break;
        result = reply_result(client, IPC_OP_OPENED);
        if (result == 0)
            result = take_opened(client, ids[i]);
        if (result == IMAGENT_ERR_SESSION_CLOSED || result == IMAGENT_ERR_UNKNOWN_SESSION ||
            result == IMAGENT_ERR_PERMISSION_DENIED) {
            /* Gone for good: tell the program and stop tracking it. */
            remove_session(client, ids[i]);
            imagent_event event = {.type = IMAGENT_EVENT_SESSION_STATE, .session = ids[i],
                                   .state = IMAGENT_SESSION_CLOSED, .code = result};
            emit(client, &event);
            result = 0;
        }
        /* Any other error (SESSION_BUSY while the old connection lingers,
         * ...) fails this attempt; ensure_connected() tries again later. */
    }
    free(ids);
    return result;
}

static int connect_once(imagent_client *client, int64_t deadline)
{
    int fd;
    int result = imagent_socket_connect(client->socket_path, &fd);
    if (result < 0)
        return result;
    client->fd = fd;
    client->connecting = true;
    client->in.length = 0;
    client->out.length = 0;
    client->max_payload = DEFAULT_MAX_PAYLOAD;
    int64_t handshake_deadline = deadline;
    if (deadline != FOREVER && deadline < now_ms() + HANDSHAKE_MIN_MS)
        handshake_deadline = now_ms() + HANDSHAKE_MIN_MS;
    result = send_hello(client, handshake_deadline);
    if (result == 0)
        result = reattach_sessions(client, handshake_deadline);
    clear_reply(client);
    if (result < 0) {
        drop_connection(client);
        client->connecting = false;
        return result;
    }
    client->connecting = false;
    if (client->was_connected) {
        imagent_event event = {.type = IMAGENT_EVENT_RECONNECTED, .state = client->link_state};
        emit(client, &event);
    }
    client->was_connected = true;
    client->reconnect_attempt = 0;
    return 0;
}

/* Whether a failed reconnect attempt may succeed later. A restarting daemon
 * can refuse, time out, say SHUTTING_DOWN, or briefly have its socket with
 * the wrong mode (PERMISSION_DENIED); these cannot change by waiting. */
static bool worth_retrying(int result)
{
    return result != IMAGENT_ERR_VERSION_UNSUPPORTED && result != IMAGENT_ERR_BAD_REQUEST &&
           result != IMAGENT_ERR_INVALID_ARGUMENT && result != IMAGENT_ERR_NO_MEMORY;
}

/* Connects again if the connection is gone, backing off between attempts,
 * until deadline. IMAGENT_ERR_UNAVAILABLE when the deadline passes first. */
static int ensure_connected(imagent_client *client, int64_t deadline)
{
    while (client->fd < 0) {
        if (client->next_reconnect_ms > now_ms()) {
            if (deadline != FOREVER && deadline < client->next_reconnect_ms) {
                sleep_until(deadline);
                return IMAGENT_ERR_UNAVAILABLE;
            }
            sleep_until(client->next_reconnect_ms);
        }
        int result = connect_once(client, deadline);
        if (result == 0)
            return 0;
        if (!worth_retrying(result))
            return result;
        client->reconnect_attempt++;
        client->next_reconnect_ms = now_ms() + imagent_reconnect_delay_ms(client->reconnect_attempt + 1);
        if (deadline != FOREVER && now_ms() >= deadline)
            return IMAGENT_ERR_UNAVAILABLE;
    }
    return 0;
}

/* What a request does when its connection went away or the daemon is
 * stopping: reconnect (within deadline) and go round again. */
static bool connection_went_away(imagent_client *client, int result)
{
    if (result == IMAGENT_ERR_SHUTTING_DOWN)
        drop_connection(client);
    return result == CONNECTION_LOST || result == IMAGENT_ERR_SHUTTING_DOWN;
}

/* ---- the API ------------------------------------------------------------ */

int imagent_connect(imagent_client **out, const char *socket_path, const char *client_name)
{
    if (!out)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    *out = NULL;
    imagent_client *client = calloc(1, sizeof *client);
    if (!client)
        return IMAGENT_ERR_NO_MEMORY;
    client->fd = -1;
    client->timeout_ms = DEFAULT_TIMEOUT_MS;
    client->max_payload = DEFAULT_MAX_PAYLOAD;
    if (client_name) {
        if (!ipc_utf8_valid(client_name, strlen(client_name))) {
            free(client);
            return IMAGENT_ERR_INVALID_ARGUMENT;
        }
        size_t length = ipc_utf8_prefix_length(client_name, strlen(client_name), CLIENT_NAME_LIMIT);
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
    clear_reply(client);
    ipc_buffer_free(&client->in);
    ipc_buffer_free(&client->out);
    message_queue_clear(&client->queue);
    free(client->sessions);
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

int imagent_open_ex(imagent_client *client, const char *service, int priority, int durable, uint64_t *session_id)
{
    if (!client || !service || !session_id || priority < 0 || priority > 2 || durable < 0 || durable > 1)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    size_t length = strlen(service);
    if (length == 0 || length > SERVICE_LIMIT || !ipc_utf8_valid(service, length))
        return IMAGENT_ERR_INVALID_ARGUMENT;
    int64_t deadline = deadline_after(client->timeout_ms);
    for (;;) {
        int result = ensure_connected(client, deadline);
        if (result < 0)
            return result;
        /* A retry after a lost connection may leave the first attempt's
         * session behind, unattached (see imagent_open(3)). */
        uint32_t request = begin_request(client, IPC_OP_OPEN);
        ipc_put_bytes(&client->out, IPC_TAG_SERVICE, service, length);
        ipc_put_u8(&client->out, IPC_TAG_PRIORITY, (uint8_t)priority);
        ipc_put_u8(&client->out, IPC_TAG_DURABLE, (uint8_t)durable);
        result = finish_request(client, request, deadline);
        if (result == 0)
            result = reply_result(client, IPC_OP_OPENED);
        if (connection_went_away(client, result))
            continue;
        if (result == 0)
            result = take_opened(client, 0);
        if (result == 0)
            *session_id = ipc_frame_uint(&client->reply, IPC_TAG_SESSION);
        clear_reply(client);
        return result;
    }
}

int imagent_open(imagent_client *client, const char *service, uint64_t *session_id)
{
    return imagent_open_ex(client, service, IMAGENT_PRIORITY_NORMAL, 1, session_id);
}

int imagent_attach(imagent_client *client, uint64_t session_id)
{
    if (!client || session_id == 0)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    int64_t deadline = deadline_after(client->timeout_ms);
    for (;;) {
        int result = ensure_connected(client, deadline);
        if (result < 0)
            return result;
        /* Tracked sessions were attached by ensure_connected() already. */
        if (find_session(client, session_id))
            return 0;
        uint32_t request = begin_request(client, IPC_OP_OPEN);
        ipc_put_u64(&client->out, IPC_TAG_SESSION, session_id);
        result = finish_request(client, request, deadline);
        if (result == 0)
            result = reply_result(client, IPC_OP_OPENED);
        if (connection_went_away(client, result))
            continue;
        if (result == 0)
            result = take_opened(client, session_id);
        clear_reply(client);
        return result;
    }
}

/* CLOSE or DETACH: the session is no longer tracked once the daemon agrees. */
static int end_session(imagent_client *client, uint16_t op, uint64_t session_id)
{
    if (!client || session_id == 0)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    int64_t deadline = deadline_after(client->timeout_ms);
    bool was_tracked = find_session(client, session_id) != NULL;
    for (;;) {
        int result = ensure_connected(client, deadline);
        if (result < 0)
            return result;
        /* Re-attaching found the session closed: a CLOSE in flight did it. */
        if (was_tracked && !find_session(client, session_id) && op == IPC_OP_CLOSE)
            return 0;
        uint32_t request = begin_request(client, op);
        ipc_put_u64(&client->out, IPC_TAG_SESSION, session_id);
        result = finish_request(client, request, deadline);
        if (result == 0)
            result = reply_result(client, IPC_OP_OK);
        if (connection_went_away(client, result))
            continue;
        clear_reply(client);
        if (result == 0 || result == IMAGENT_ERR_SESSION_CLOSED || result == IMAGENT_ERR_UNKNOWN_SESSION)
            remove_session(client, session_id);
        return result;
    }
}

int imagent_close(imagent_client *client, uint64_t session_id)
{
    return end_session(client, IPC_OP_CLOSE, session_id);
}

int imagent_detach(imagent_client *client, uint64_t session_id)
{
    return end_session(client, IPC_OP_DETACH, session_id);
}

int imagent_send_ttl(imagent_client *client, uint64_t session_id, const void *payload, size_t length,
                     uint32_t ttl_ms, uint64_t *seq)
{
    if (!client || session_id == 0 || (!payload && length > 0))
        return IMAGENT_ERR_INVALID_ARGUMENT;
    int64_t deadline = deadline_after(client->timeout_ms);
    for (;;) {
        int result = ensure_connected(client, deadline);
        if (result < 0)
            return result;
        if (length > client->max_payload)
            return IMAGENT_ERR_PAYLOAD_TOO_LARGE;
        session *target = find_session(client, session_id);
        bool tracked = target != NULL;
        uint64_t accepted_before = tracked ? target->accepted_seq : 0;

        uint32_t request = begin_request(client, IPC_OP_SEND);
        ipc_put_u64(&client->out, IPC_TAG_SESSION, session_id);
        ipc_put_bytes(&client->out, IPC_TAG_PAYLOAD, payload, length);
        if (ttl_ms > 0)
            ipc_put_u32(&client->out, IPC_TAG_TTL_MS, ttl_ms);
        result = finish_request(client, request, deadline);
        if (result == 0) {
            result = reply_result(client, IPC_OP_ACCEPTED);
            if (result == 0) {
                uint64_t accepted = ipc_frame_uint(&client->reply, IPC_TAG_SEQ);
                target = find_session(client, session_id);
                if (target && accepted > target->accepted_seq)
                    target->accepted_seq = accepted;
                if (seq)
                    *seq = accepted;
            }
            clear_reply(client);
            if (result != IMAGENT_ERR_SHUTTING_DOWN)
                return result;
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
        if (!tracked)
            return IMAGENT_ERR_OUTCOME_UNKNOWN;
        /* Re-attaching tells from SENT_SEQ whether the daemon stored it. */
        result = ensure_connected(client, deadline);
        if (result < 0)
            return result;
        target = find_session(client, session_id);
        if (!target)
            return IMAGENT_ERR_SESSION_CLOSED;
        if (target->accepted_seq > accepted_before) {
            if (seq)
                *seq = accepted_before + 1;
            return 0;
        }
        /* Not stored: send it again. */
    }
}

int imagent_send(imagent_client *client, uint64_t session_id, const void *payload, size_t length, uint64_t *seq)
{
    return imagent_send_ttl(client, session_id, payload, length, 0, seq);
}

/* After an overflow: once the program has taken every queued message,
 * reconnect so the daemon delivers the dropped ones again. */
static void resync_if_drained(imagent_client *client)
{
    if (!client->resync_needed || client->queue.count > 0)
        return;
    client->resync_needed = false;
    drop_connection(client);
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
            message->session = node->session;
            message->seq = node->seq;
            message->payload = node->payload;
            message->length = node->length;
            message->internal = node;
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
        result = write_available(client);
        if (result == 0)
            result = read_available(client, false);
        if (result == CONNECTION_LOST)
            continue;
        if (result < 0)
            return result;
        if (client->queue.count > 0)
            continue;
        int timeout = poll_timeout(deadline);
        if (timeout == 0)
            return IMAGENT_ERR_TIMEDOUT;
        struct pollfd watched = {.fd = client->fd, .events = POLLIN};
        if (poll(&watched, 1, timeout) < 0 && errno != EINTR)
            return IMAGENT_ERR_SYSTEM;
    }
}

void imagent_message_release(imagent_message *message)
{
    if (!message)
        return;
    free(message->internal);
    memset(message, 0, sizeof *message);
}

int imagent_ack(imagent_client *client, uint64_t session_id, uint64_t seq)
{
    if (!client || session_id == 0)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    session *target = find_session(client, session_id);
    if (target && seq > target->acked_seq)
        target->acked_seq = seq;
    if (client->fd < 0)
        return target ? 0 : IMAGENT_ERR_UNAVAILABLE; /* tracked: re-sent after re-attaching */
    queue_ack(client, session_id, seq);
    int result = write_available(client);
    if (result == CONNECTION_LOST && target)
        return 0;
    return result;
}

int imagent_fd(const imagent_client *client)
{
    return client ? client->fd : -1;
}

int imagent_process(imagent_client *client)
{
    if (!client)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    resync_if_drained(client);
    int result = 0;
    for (int round = 0; round < 2; round++) {
        if (client->fd < 0) {
            if (client->next_reconnect_ms > now_ms())
                return IMAGENT_ERR_UNAVAILABLE;
            result = ensure_connected(client, now_ms());
            if (result < 0)
                return result;
        }
        result = write_available(client);
        if (result == 0)
            result = read_available(client, false);
        if (result != CONNECTION_LOST)
            return result;
    }
    return result;
}

/* STATUS, SESSIONS, METRICS: RESULT's JSON as a NUL-terminated string. */
static int query_json(imagent_client *client, uint16_t op, char **json)
{
    if (!client || !json)
        return IMAGENT_ERR_INVALID_ARGUMENT;
    *json = NULL;
    int64_t deadline = deadline_after(client->timeout_ms);
    for (;;) {
        int result = ensure_connected(client, deadline);
        if (result < 0)
            return result;
        uint32_t request = begin_request(client, op);
        result = finish_request(client, request, deadline);
        if (result == 0)
            result = reply_result(client, IPC_OP_RESULT);
        if (connection_went_away(client, result))
            continue;
        if (result == 0) {
            ipc_bytes text = ipc_frame_bytes(&client->reply, IPC_TAG_JSON);
            *json = malloc((size_t)text.length + 1);
            if (!*json) {
                result = IMAGENT_ERR_NO_MEMORY;
            } else {
                if (text.length)
                    memcpy(*json, text.data, text.length);
                (*json)[text.length] = '\0';
            }
        }
        clear_reply(client);
        return result;
    }
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
    int64_t deadline = deadline_after(client->timeout_ms);
    for (;;) {
        int result = ensure_connected(client, deadline);
        if (result < 0)
            return result;
        uint32_t request = begin_request(client, IPC_OP_PING);
        result = finish_request(client, request, deadline);
        if (result == 0)
            result = reply_result(client, IPC_OP_PONG);
        if (connection_went_away(client, result))
            continue;
        clear_reply(client);
        return result;
    }
}
