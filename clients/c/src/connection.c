/*
 * connection.c - the socket and its framing (see connection.h).
 *
 * The socket is non-blocking and close-on-exec (socket_path.c). Writes use
 * MSG_NOSIGNAL, so a daemon that went away costs an EPIPE, never a SIGPIPE
 * that would kill the program; no signal handler is installed. EINTR is
 * retried everywhere, and a short write leaves the rest in the buffer for the
 * next flush.
 */
#include "connection.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "socket_path.h"

#define READ_CHUNK 65536

void connection_init(daemon_connection *conn)
{
    *conn = (daemon_connection){.fd = -1};
}

int connection_open(daemon_connection *conn, const char *socket_path)
{
    int fd;
    int result = imagent_socket_connect(socket_path, &fd);
    if (result < 0)
        return result;
    connection_close(conn); /* never two sockets: an open one would leak */
    conn->fd = fd;
    return 0;
}

void connection_close(daemon_connection *conn)
{
    if (conn->fd >= 0)
        close(conn->fd);
    conn->fd = -1;
    conn->in.length = 0;
    conn->decoded = 0;
    conn->out.length = 0;
}

void connection_free(daemon_connection *conn)
{
    connection_close(conn);
    ipc_buffer_free(&conn->in);
    ipc_buffer_free(&conn->out);
}

int connection_flush(daemon_connection *conn)
{
    while (conn->out.length > 0) {
        if (conn->fd < 0)
            return CONNECTION_LOST;
        ssize_t sent = send(conn->fd, conn->out.data, conn->out.length, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent > 0) {
            ipc_buffer_consume(&conn->out, (size_t)sent);
            continue;
        }
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return CONNECTION_LOST;
    }
    return 0;
}

/* Makes room for the next read: the whole next frame when its length is
 * known (checked against the limit before anything is allocated), else a
 * chunk. Decoded bytes are dropped first, so the buffer never holds more than
 * one frame beyond a chunk. */
static int reserve_for_read(daemon_connection *conn)
{
    ipc_buffer_consume(&conn->in, conn->decoded);
    conn->decoded = 0;
    size_t frame_size = 0;
    int sized = ipc_frame_size(conn->in.data, conn->in.length, conn->max_frame_length, &frame_size);
    if (sized < 0)
        return IMAGENT_ERR_PROTOCOL;
    size_t wanted = READ_CHUNK;
    if (sized == IPC_DECODED && frame_size > conn->in.length && frame_size - conn->in.length > wanted)
        wanted = frame_size - conn->in.length;
    return ipc_buffer_reserve(&conn->in, wanted) ? 0 : IMAGENT_ERR_NO_MEMORY;
}

int connection_fill(daemon_connection *conn)
{
    if (conn->fd < 0)
        return CONNECTION_LOST;
    int result = reserve_for_read(conn);
    if (result < 0)
        return result;
    for (;;) {
        ssize_t got =
            recv(conn->fd, conn->in.data + conn->in.length, conn->in.capacity - conn->in.length, MSG_DONTWAIT);
        if (got > 0) {
            conn->in.length += (size_t)got;
            return CONNECTION_READ_SOME;
        }
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return CONNECTION_NOTHING_NEW;
        return CONNECTION_LOST; /* end of file, or a reset */
    }
}

int connection_next_frame(daemon_connection *conn, ipc_frame *frame, const uint8_t **bytes, size_t *size)
{
    if (conn->decoded >= conn->in.length)
        return IPC_NEED_MORE; /* also before the first read, while in.data is NULL */
    const uint8_t *start = conn->in.data + conn->decoded;
    size_t consumed = 0;
    int decoded = ipc_frame_decode(start, conn->in.length - conn->decoded, conn->max_frame_length, frame, &consumed);
    if (decoded == IPC_NEED_MORE)
        return IPC_NEED_MORE;
    if (decoded < 0)
        return IMAGENT_ERR_PROTOCOL;
    conn->decoded += consumed;
    *bytes = start;
    *size = consumed;
    return IPC_DECODED;
}

int connection_wait(const daemon_connection *conn, int timeout_ms)
{
    struct pollfd watched = {.fd = conn->fd, .events = POLLIN};
    if (conn->out.length > 0)
        watched.events |= POLLOUT;
    if (poll(&watched, 1, timeout_ms) < 0 && errno != EINTR)
        return IMAGENT_ERR_SYSTEM;
    return 0;
}

int imagent_reconnect_delay_ms(unsigned attempt)
{
    if (attempt <= 1)
        return 0;
    if (attempt >= 7)
        return 1000;
    return 50 << (attempt - 2);
}

void backoff_after_loss(reconnect_backoff *backoff, int64_t now_ms)
{
    backoff->failed_attempts = 0;
    backoff->next_attempt_ms = now_ms;
}

void backoff_after_failure(reconnect_backoff *backoff, int64_t now_ms)
{
    /* Saturates: past the cap every delay is the same, and a counter that
     * wrapped would start hammering again. */
    if (backoff->failed_attempts < 64)
        backoff->failed_attempts++;
    backoff->next_attempt_ms = now_ms + imagent_reconnect_delay_ms(backoff->failed_attempts + 1);
}

void backoff_after_success(reconnect_backoff *backoff)
{
    backoff->failed_attempts = 0;
}
