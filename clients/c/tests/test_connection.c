/*
 * test_connection.c - the socket and its framing over a socketpair: short
 * writes finished later, a closed peer seen as a lost connection (never a
 * SIGPIPE), frames that arrive a byte at a time, and a frame longer than the
 * limit refused from its length field before it is buffered.
 */
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connection.h"
#include "test.h"

/* conn takes one end; *peer is the other. */
static bool connected_pair(daemon_connection *conn, int *peer)
{
    int ends[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) < 0)
        return false;
    connection_init(conn);
    conn->fd = ends[0];
    conn->max_frame_length = 1048576 + IPC_FRAME_OVERHEAD;
    *peer = ends[1];
    return true;
}

static void queue_frame(daemon_connection *conn, const uint8_t *payload, size_t length)
{
    ipc_frame_begin(&conn->out, IPC_OP_SEND, 1);
    ipc_put_bytes(&conn->out, IPC_TAG_PAYLOAD, payload, length);
    ipc_frame_end(&conn->out);
}

static void writes_what_the_socket_takes_and_the_rest_later(void)
{
    daemon_connection conn;
    int peer;
    CHECK(connected_pair(&conn, &peer));
    int small = 4096;
    setsockopt(conn.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    static uint8_t payload[1 << 20];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7);
    queue_frame(&conn, payload, sizeof payload);
    size_t total = conn.out.length;
    int first = connection_flush(&conn);
    bool short_write = conn.out.length > 0; /* the socket took part of it */
    static uint8_t received[(1 << 20) + 64];
    size_t got = 0;
    int flushed = 0;
    while (got < total && flushed == 0) {
        ssize_t n = recv(peer, received + got, sizeof received - got, MSG_DONTWAIT);
        if (n > 0)
            got += (size_t)n;
        flushed = connection_flush(&conn);
    }
    connection_free(&conn);
    close(peer);
    CHECK(first == 0 && short_write);
    CHECK(flushed == 0 && got == total);
    CHECK(memcmp(received + total - sizeof payload, payload, sizeof payload) == 0);
}

static void a_write_to_a_closed_peer_is_a_lost_connection_not_a_signal(void)
{
    void (*previous)(int) = signal(SIGPIPE, SIG_DFL); /* SIGPIPE would end this test program */
    daemon_connection conn;
    int peer;
    CHECK(connected_pair(&conn, &peer));
    close(peer);
    queue_frame(&conn, (const uint8_t *)"x", 1);
    int flushed = connection_flush(&conn);
    connection_free(&conn);
    signal(SIGPIPE, previous);
    CHECK(flushed == CONNECTION_LOST);
}

static void decodes_a_frame_that_arrives_a_byte_at_a_time(void)
{
    daemon_connection conn;
    int peer;
    CHECK(connected_pair(&conn, &peer));
    ipc_buffer frame = {0};
    ipc_frame_begin(&frame, IPC_OP_PONG, 9);
    ipc_put_u64(&frame, IPC_TAG_SEQ, 42);
    CHECK(ipc_frame_end(&frame));
    ipc_frame decoded;
    const uint8_t *bytes = NULL;
    size_t size = 0;
    int found = IPC_NEED_MORE;
    for (size_t i = 0; i < frame.length && found == IPC_NEED_MORE; i++) {
        if (write(peer, frame.data + i, 1) != 1)
            break;
        while (connection_fill(&conn) == CONNECTION_READ_SOME) {
        }
        found = connection_next_frame(&conn, &decoded, &bytes, &size);
    }
    size_t length = frame.length;
    ipc_buffer_free(&frame);
    /* Read before the next fill: the decoded frame points into the buffer. */
    bool intact = found == IPC_DECODED && decoded.op == IPC_OP_PONG && decoded.request == 9 &&
                  ipc_frame_uint(&decoded, IPC_TAG_SEQ) == 42;
    close(peer);
    int after_end = connection_fill(&conn); /* the peer hung up */
    connection_free(&conn);
    CHECK(intact && size == length);
    CHECK(after_end == CONNECTION_LOST);
}

static void refuses_a_frame_over_the_limit_before_buffering_it(void)
{
    daemon_connection conn;
    int peer;
    CHECK(connected_pair(&conn, &peer));
    conn.max_frame_length = 1000;
    const uint8_t header[10] = {0x40, 0, 0, 0, 0x80, 0x7f, 0, 0, 0, 1}; /* 1 GiB announced */
    CHECK(write(peer, header, sizeof header) == (ssize_t)sizeof header);
    int first = connection_fill(&conn);
    ipc_frame frame;
    const uint8_t *bytes;
    size_t size;
    int decoded = connection_next_frame(&conn, &frame, &bytes, &size);
    int again = connection_fill(&conn);
    size_t capacity = conn.in.capacity;
    connection_free(&conn);
    close(peer);
    CHECK(first == CONNECTION_READ_SOME);
    CHECK(decoded == IMAGENT_ERR_PROTOCOL && again == IMAGENT_ERR_PROTOCOL);
    CHECK(capacity <= 65536); /* one read chunk, not the gigabyte */
}

void run_connection_tests(void)
{
    RUN(writes_what_the_socket_takes_and_the_rest_later);
    RUN(a_write_to_a_closed_peer_is_a_lost_connection_not_a_signal);
    RUN(decodes_a_frame_that_arrives_a_byte_at_a_time);
    RUN(refuses_a_frame_over_the_limit_before_buffering_it);
}
