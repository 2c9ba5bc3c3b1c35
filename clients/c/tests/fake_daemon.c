/*
 * fake_daemon.c - a scripted imagentd for the client tests.
 */
#include "fake_daemon.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define STEP_TIMEOUT_MS 5000

struct fake_daemon {
    char directory[64];
    char path[96];
    int listener;
    pthread_t thread;
    fake_script script;
    void *context;
    int failures;
};

static void *run_script(void *argument)
{
    fake_daemon *daemon = argument;
    daemon->script(daemon, daemon->context);
    return NULL;
}

fake_daemon *fake_daemon_start(fake_script script, void *context)
{
    fake_daemon *daemon = calloc(1, sizeof *daemon);
    if (!daemon)
        return NULL;
    snprintf(daemon->directory, sizeof daemon->directory, "/tmp/imagent-c-test-XXXXXX");
    if (!mkdtemp(daemon->directory)) {
        free(daemon);
        return NULL;
    }
    snprintf(daemon->path, sizeof daemon->path, "%s/imagent.sock", daemon->directory);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", daemon->path);
    daemon->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (daemon->listener < 0 || bind(daemon->listener, (struct sockaddr *)&address, sizeof address) < 0 ||
        listen(daemon->listener, 8) < 0) {
        perror("fake daemon");
        exit(2);
    }
    daemon->script = script;
    daemon->context = context;
    pthread_create(&daemon->thread, NULL, run_script, daemon);
    return daemon;
}

const char *fake_daemon_path(const fake_daemon *daemon)
{
    return daemon->path;
}

int fake_daemon_finish(fake_daemon *daemon)
{
    pthread_join(daemon->thread, NULL);
    int failures = daemon->failures;
    close(daemon->listener);
    unlink(daemon->path);
    rmdir(daemon->directory);
    free(daemon);
    return failures;
}

void fake_fail(fake_daemon *daemon, const char *why)
{
    fprintf(stderr, "fake daemon: %s\n", why);
    daemon->failures++;
}

static bool wait_readable(int fd)
{
    struct pollfd watched = {.fd = fd, .events = POLLIN};
    return poll(&watched, 1, STEP_TIMEOUT_MS) == 1;
}

bool fake_accept(fake_daemon *daemon, fake_connection *connection)
{
    memset(connection, 0, sizeof *connection);
    connection->fd = -1;
    if (daemon->failures)
        return false;
    if (!wait_readable(daemon->listener)) {
        fake_fail(daemon, "no connection came");
        return false;
    }
    connection->fd = accept(daemon->listener, NULL, NULL);
    return connection->fd >= 0;
}

/* Reads until one frame is whole; false at end of file or after a timeout. */
static bool read_frame(fake_connection *connection)
{
    for (;;) {
        size_t size = 0;
        if (ipc_frame_size(connection->buffer, connection->length, sizeof connection->frame_bytes, &size) ==
                IPC_DECODED &&
            connection->length >= size) {
            memcpy(connection->frame_bytes, connection->buffer, size);
            memmove(connection->buffer, connection->buffer + size, connection->length - size);
            connection->length -= size;
            size_t consumed;
            return ipc_frame_decode(connection->frame_bytes, size, sizeof connection->frame_bytes, &connection->frame,
                                    &consumed) == IPC_DECODED;
        }
        if (connection->length == sizeof connection->buffer || !wait_readable(connection->fd))
            return false;
        ssize_t got = read(connection->fd, connection->buffer + connection->length,
                           sizeof connection->buffer - connection->length);
        if (got <= 0)
            return false;
        connection->length += (size_t)got;
    }
}

bool fake_expect(fake_daemon *daemon, fake_connection *connection, uint16_t op)
{
    if (daemon->failures)
        return false;
    if (!read_frame(connection)) {
        char why[64];
        snprintf(why, sizeof why, "expected op 0x%04x, got nothing", op);
        fake_fail(daemon, why);
        return false;
    }
    if (connection->frame.op != op) {
        char why[64];
        snprintf(why, sizeof why, "expected op 0x%04x, got 0x%04x", op, connection->frame.op);
        fake_fail(daemon, why);
        return false;
    }
    return true;
}

bool fake_expect_end(fake_daemon *daemon, fake_connection *connection)
{
    if (daemon->failures)
        return false;
    if (wait_readable(connection->fd) && read_frame(connection)) {
        fake_fail(daemon, "expected the end, got a frame");
        return false;
    }
    return true;
}

void fake_write(fake_daemon *daemon, fake_connection *connection, ipc_buffer *frame)
{
    if (!ipc_frame_end(frame))
        fake_fail(daemon, "could not build a frame");
    size_t written = 0;
    while (!daemon->failures && written < frame->length) {
        ssize_t sent = send(connection->fd, frame->data + written, frame->length - written, MSG_NOSIGNAL);
        if (sent <= 0) {
            fake_fail(daemon, "write failed");
            break;
        }
        written += (size_t)sent;
    }
    ipc_buffer_free(frame);
}

void fake_close(fake_connection *connection)
{
    if (connection->fd >= 0)
        close(connection->fd);
    connection->fd = -1;
}

bool fake_handshake(fake_daemon *daemon, fake_connection *connection)
{
    if (!fake_expect(daemon, connection, IPC_OP_HELLO))
        return false;
    ipc_buffer welcome = {0};
    ipc_frame_begin(&welcome, IPC_OP_WELCOME, connection->frame.request);
    ipc_put_u8(&welcome, IPC_TAG_IPC_VERSION, 1);
    ipc_put_bytes(&welcome, IPC_TAG_DAEMON_VERSION, "9.9.9", 5);
    ipc_put_u32(&welcome, IPC_TAG_MAX_PAYLOAD, 1048576);
    ipc_put_u8(&welcome, IPC_TAG_LINK_STATE, 2);
    fake_write(daemon, connection, &welcome);
    return daemon->failures == 0;
}

bool fake_connect(fake_daemon *daemon, fake_connection *connection)
{
    return fake_accept(daemon, connection) && fake_handshake(daemon, connection);
}

bool fake_opened(fake_daemon *daemon, fake_connection *connection, uint64_t id, uint64_t sent_seq,
                 uint64_t delivered_seq)
{
    if (!fake_expect(daemon, connection, IPC_OP_OPEN))
        return false;
    ipc_buffer opened = {0};
    ipc_frame_begin(&opened, IPC_OP_OPENED, connection->frame.request);
    ipc_put_u64(&opened, IPC_TAG_SESSION, id);
    ipc_put_u8(&opened, IPC_TAG_SESSION_STATE, 1);
    ipc_put_u64(&opened, IPC_TAG_SENT_SEQ, sent_seq);
    ipc_put_u64(&opened, IPC_TAG_ACKED_SEQ, 0);
    ipc_put_u64(&opened, IPC_TAG_DELIVERED_SEQ, delivered_seq);
    fake_write(daemon, connection, &opened);
    return daemon->failures == 0;
}

void fake_message(fake_daemon *daemon, fake_connection *connection, uint64_t id, uint64_t seq, const char *text)
{
    ipc_buffer message = {0};
    ipc_frame_begin(&message, IPC_OP_EVENT_MESSAGE, 0);
    ipc_put_u64(&message, IPC_TAG_SESSION, id);
    ipc_put_u64(&message, IPC_TAG_SEQ, seq);
    ipc_put_bytes(&message, IPC_TAG_PAYLOAD, text, strlen(text));
    fake_write(daemon, connection, &message);
}

void fake_reply(fake_daemon *daemon, fake_connection *connection, uint16_t op)
{
    ipc_buffer reply = {0};
    ipc_frame_begin(&reply, op, connection->frame.request);
    fake_write(daemon, connection, &reply);
}

void fake_accepted(fake_daemon *daemon, fake_connection *connection, uint64_t id, uint64_t seq)
{
    ipc_buffer accepted = {0};
    ipc_frame_begin(&accepted, IPC_OP_ACCEPTED, connection->frame.request);
    ipc_put_u64(&accepted, IPC_TAG_SESSION, id);
    ipc_put_u64(&accepted, IPC_TAG_SEQ, seq);
    fake_write(daemon, connection, &accepted);
}
