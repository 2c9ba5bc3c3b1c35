/*
 * test_client.c - the client against a scripted fake daemon: the handshake,
 * requests and replies, errors, events, the event-loop calls, and surviving
 * the daemon (reconnect, re-attach, the send in flight resolved from
 * SENT_SEQ, redelivered messages dropped, a lost ack repeated).
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client_state.h"
#include "fake_daemon.h"
#include "imagent.h"
#include "socket_path.h"
#include "test.h"

#define SESSION 7

/* Connections are big (their buffers); scripts run one at a time. */
static fake_connection first, second;

/* A test's daemon, its client, and the session the client opened. */
typedef struct fixture {
    fake_daemon *daemon;
    imagent_client *client;
    uint64_t session;
    int opened; /* what imagent_open() returned */
} fixture;

/* Starts the daemon on `script` and connects a client named "test" to it;
 * false when that fails. */
static bool start(fixture *f, fake_script script, void *context)
{
    *f = (fixture){.daemon = fake_daemon_start(script, context)};
    return imagent_connect(&f->client, fake_daemon_path(f->daemon), "test") == 0;
}

/* start(), then opens a session to "echo" (the result is in f->opened). */
static bool start_with_session(fixture *f, fake_script script, void *context)
{
    if (!start(f, script, context))
        return false;
    f->opened = imagent_open(f->client, "echo", &f->session);
    return true;
}

/* Frees the client (the daemon sees it hang up), then waits for the script:
 * how many of its steps failed. */
static int finish(fixture *f)
{
    imagent_free(f->client);
    return fake_daemon_finish(f->daemon);
}

/* ---- the handshake ---------------------------------------------------- */

static void hello_with_a_long_name(fake_daemon *daemon, void *context)
{
    (void)context;
    if (!fake_accept(daemon, &first) || !fake_expect(daemon, &first, IPC_OP_HELLO))
        return;
    ipc_bytes name = ipc_frame_bytes(&first.frame, IPC_TAG_CLIENT_NAME);
    if (ipc_frame_uint(&first.frame, IPC_TAG_IPC_VERSION) != 1 || name.length != 127)
        fake_fail(daemon, "HELLO without version 1 or its name not cut to 127 bytes");
    ipc_buffer welcome = {0};
    ipc_frame_begin(&welcome, IPC_OP_WELCOME, first.frame.request);
    ipc_put_u8(&welcome, IPC_TAG_IPC_VERSION, 1);
    ipc_put_bytes(&welcome, IPC_TAG_DAEMON_VERSION, "9.9.9", 5);
    ipc_put_u32(&welcome, IPC_TAG_MAX_PAYLOAD, 0xFFFFFFFFu); /* more than anyone should buffer */
    ipc_put_u8(&welcome, IPC_TAG_LINK_STATE, 1);
    fake_write(daemon, &first, &welcome);
    fake_expect(daemon, &first, IPC_OP_PING);
    fake_reply(daemon, &first, IPC_OP_PONG);
    /* A frame just above the cap + 64 KiB: refused from its length. */
    fake_expect(daemon, &first, IPC_OP_PING);
    uint8_t header[10] = {0, 0, 0, 0, 0x00, 0x08, 0, 0, 0, 0};
    uint32_t length = 16777216u + 65536u + 1u;
    header[0] = (uint8_t)(length >> 24), header[1] = (uint8_t)(length >> 16);
    header[2] = (uint8_t)(length >> 8), header[3] = (uint8_t)length;
    if (send(first.fd, header, sizeof header, MSG_NOSIGNAL) != (ssize_t)sizeof header)
        fake_fail(daemon, "could not write the oversized header");
    fake_expect_end(daemon, &first);
    fake_close(&first);
}

static void connects_with_a_name_cut_at_a_utf8_boundary_and_a_capped_max_payload(void)
{
    char name[200];
    memset(name, 'a', 127);
    memcpy(name + 127, "\xc3\xa9 and more", sizeof "\xc3\xa9 and more"); /* é straddles byte 128 */
    fake_daemon *daemon = fake_daemon_start(hello_with_a_long_name, NULL);
    imagent_client *client = NULL;
    int connected = imagent_connect(&client, fake_daemon_path(daemon), name);
    int pinged = connected == 0 ? imagent_ping(client) : connected;
    const char *version = client ? imagent_daemon_version(client) : "";
    uint32_t max_payload = client ? imagent_max_payload(client) : 0;
    int link = client ? imagent_link_state(client) : -1;
    int equal_version = strcmp(version, "9.9.9") == 0;
    imagent_set_timeout(client, 2000);
    int oversized = client ? imagent_ping(client) : 0;
    imagent_free(client);
    CHECK(fake_daemon_finish(daemon) == 0);
    CHECK(connected == 0 && pinged == 0);
    CHECK(equal_version);
    CHECK(max_payload == 16777216u);
    CHECK(oversized == IMAGENT_ERR_PROTOCOL);
    CHECK(link == IMAGENT_LINK_CONNECTING);
}

static void reports_unavailable_without_a_daemon(void)
{
    imagent_client *client = NULL;
    CHECK(imagent_connect(&client, "/nonexistent/imagent.sock", "test") == IMAGENT_ERR_UNAVAILABLE);
    CHECK(client == NULL);
    CHECK(imagent_connect(NULL, NULL, NULL) == IMAGENT_ERR_INVALID_ARGUMENT);
}

static void resolves_the_socket_path_from_the_environment(void)
{
    char *path = NULL;
    CHECK(imagent_resolve_socket_path("/explicit.sock", &path) == 0 && strcmp(path, "/explicit.sock") == 0);
    free(path);
    setenv("IMAGENT_SOCKET", "/from/env.sock", 1);
    CHECK(imagent_resolve_socket_path(NULL, &path) == 0 && strcmp(path, "/from/env.sock") == 0);
    free(path);
    setenv("IMAGENT_SOCKET", "", 1); /* empty: as if unset */
    char runtime[] = "/tmp/imagent-c-runtime-XXXXXX";
    CHECK(mkdtemp(runtime) != NULL);
    setenv("XDG_RUNTIME_DIR", runtime, 1);
    struct stat info;
    bool system_socket = stat(IMAGENT_SYSTEM_SOCKET, &info) == 0;
    CHECK(imagent_resolve_socket_path(NULL, &path) == 0 && strcmp(path, IMAGENT_SYSTEM_SOCKET) == 0);
    free(path);
    char user_socket[160], user_dir[128];
    snprintf(user_dir, sizeof user_dir, "%s/imagent", runtime);
    snprintf(user_socket, sizeof user_socket, "%s/imagent.sock", user_dir);
    mkdir(user_dir, 0700);
    FILE *placeholder = fopen(user_socket, "w");
    if (placeholder)
        fclose(placeholder);
    int resolved = imagent_resolve_socket_path(NULL, &path);
    bool chose_user_socket = resolved == 0 && strcmp(path, system_socket ? IMAGENT_SYSTEM_SOCKET : user_socket) == 0;
    free(path);
    unlink(user_socket);
    rmdir(user_dir);
    rmdir(runtime);
    unsetenv("IMAGENT_SOCKET");
    unsetenv("XDG_RUNTIME_DIR");
    CHECK(chose_user_socket);
}

/* ---- requests and replies --------------------------------------------- */

static void open_send_receive_ack(fake_daemon *daemon, void *context)
{
    (void)context;
    if (!fake_connect(daemon, &first) || !fake_opened(daemon, &first, SESSION, 0, 0) ||
        !fake_expect(daemon, &first, IPC_OP_SEND))
        return;
    ipc_bytes payload = ipc_frame_bytes(&first.frame, IPC_TAG_PAYLOAD);
    if (ipc_frame_uint(&first.frame, IPC_TAG_SESSION) != SESSION || payload.length != 4 ||
        memcmp(payload.data, "ping", 4) != 0 || ipc_frame_uint(&first.frame, IPC_TAG_TTL_MS) != 1500)
        fake_fail(daemon, "SEND differs");
    fake_accepted(daemon, &first, SESSION, 1);
    fake_message(daemon, &first, SESSION, 1, "pong");
    if (!fake_expect(daemon, &first, IPC_OP_ACK))
        return;
    if (first.frame.request != 0 || ipc_frame_uint(&first.frame, IPC_TAG_SEQ) != 1)
        fake_fail(daemon, "ACK differs");
    fake_expect(daemon, &first, IPC_OP_STATUS);
    ipc_buffer result = {0};
    ipc_frame_begin(&result, IPC_OP_RESULT, first.frame.request);
    ipc_put_bytes(&result, IPC_TAG_JSON, "{\"link\":{}}", 11);
    fake_write(daemon, &first, &result);
    fake_expect(daemon, &first, IPC_OP_CLOSE);
    fake_reply(daemon, &first, IPC_OP_OK);
    fake_close(&first);
}

static void opens_sends_receives_acks_and_closes(void)
{
    fixture f;
    CHECK(start_with_session(&f, open_send_receive_ack, NULL));
    uint64_t seq = 0;
    int sent = imagent_send_ttl(f.client, f.session, "ping", 4, 1500, &seq);
    imagent_message message;
    int received = imagent_receive(f.client, &message, 5000);
    bool intact = received == 0 && message.session == SESSION && message.seq == 1 && message.length == 4 &&
                  memcmp(message.payload, "pong", 4) == 0;
    int acked = received == 0 ? imagent_ack(f.client, message.session, message.seq) : received;
    imagent_message_release(&message);
    char *json = NULL;
    int status = imagent_status(f.client, &json);
    bool status_text = json && strcmp(json, "{\"link\":{}}") == 0;
    free(json);
    int closed = imagent_close(f.client, f.session);
    CHECK(finish(&f) == 0);
    CHECK(f.opened == 0 && f.session == SESSION);
    CHECK(sent == 0 && seq == 1);
    CHECK(intact && acked == 0);
    CHECK(status == 0 && status_text);
    CHECK(closed == 0);
}

static void refuse_two_sends(fake_daemon *daemon, void *context)
{
    (void)context;
    if (!fake_connect(daemon, &first))
        return;
    const uint16_t codes[] = {6, 99}; /* QUEUE_FULL, and one this library does not know */
    for (int i = 0; i < 2; i++) {
        if (!fake_expect(daemon, &first, IPC_OP_SEND))
            return;
        ipc_buffer error = {0};
        ipc_frame_begin(&error, IPC_OP_ERROR, first.frame.request);
        ipc_put_u16(&error, IPC_TAG_CODE, codes[i]);
        ipc_put_bytes(&error, IPC_TAG_MESSAGE, "no", 2);
        fake_write(daemon, &first, &error);
    }
    fake_close(&first);
}

static void maps_error_replies_and_unknown_codes(void)
{
    fixture f;
    CHECK(start(&f, refuse_two_sends, NULL));
    int full = imagent_send(f.client, 99, "x", 1, NULL);
    int unknown = imagent_send(f.client, 99, "x", 1, NULL);
    int too_large = imagent_send(f.client, 99, "x", imagent_max_payload(f.client) + 1, NULL);
    CHECK(finish(&f) == 0);
    CHECK(full == IMAGENT_ERR_QUEUE_FULL);
    CHECK(unknown == IMAGENT_ERR_INTERNAL);
    CHECK(too_large == IMAGENT_ERR_PAYLOAD_TOO_LARGE); /* refused before it is written */
}

static void answer_open_with_a_huge_frame(fake_daemon *daemon, void *context)
{
    (void)context;
    if (!fake_connect(daemon, &first) || !fake_expect(daemon, &first, IPC_OP_OPEN))
        return;
    /* A length far above MAX_PAYLOAD + 64 KiB, and nothing behind it. */
    const uint8_t huge[10] = {0x7f, 0xff, 0xff, 0xff, 0x80, 0x02, 0, 0, 0, 1};
    if (write(first.fd, huge, sizeof huge) != (ssize_t)sizeof huge)
        fake_fail(daemon, "write failed");
    fake_close(&first);
}

static void refuses_an_oversize_frame_from_the_daemon(void)
{
    fixture f;
    CHECK(start_with_session(&f, answer_open_with_a_huge_frame, NULL));
    int fd = imagent_fd(f.client);
    CHECK(finish(&f) == 0);
    CHECK(f.opened == IMAGENT_ERR_PROTOCOL);
    CHECK(fd == -1); /* a connection that sent garbage is not trusted again */
}

static void deliver_one_message(fake_daemon *daemon, void *context)
{
    (void)context;
    if (!fake_connect(daemon, &first) || !fake_opened(daemon, &first, SESSION, 0, 0))
        return;
    fake_message(daemon, &first, SESSION, 1, "kept");
    fake_expect_end(daemon, &first);
    fake_close(&first);
}

static void a_message_outlives_its_client_and_a_second_release_is_harmless(void)
{
    fixture f;
    CHECK(start_with_session(&f, deliver_one_message, NULL));
    imagent_message message;
    int received = imagent_receive(f.client, &message, 5000);
    CHECK(finish(&f) == 0);
    CHECK(f.opened == 0 && received == 0);
    /* Under ASan, a payload freed with the client would fail here. */
    CHECK(message.length == 4 && memcmp(message.payload, "kept", 4) == 0);
    imagent_message_release(&message);
    CHECK(message.payload == NULL && message.internal == NULL);
    imagent_message_release(&message); /* frees nothing: the first release cleared it */
    imagent_message_release(NULL);
}

/* ---- events and the event loop ---------------------------------------- */

typedef struct seen_events {
    int link_state;
    uint64_t acked_seq;
    int expired_code;
    size_t expired_text_length;
    int count;
} seen_events;

static void remember_event(const imagent_event *event, void *user_data)
{
    seen_events *seen = user_data;
    seen->count++;
    if (event->type == IMAGENT_EVENT_LINK_STATE)
        seen->link_state = event->state;
    if (event->type == IMAGENT_EVENT_ACKED)
        seen->acked_seq = event->seq;
    if (event->type == IMAGENT_EVENT_EXPIRED) {
        seen->expired_code = event->code;
        seen->expired_text_length = event->message ? strlen(event->message) : 0;
    }
}

static void events_then_a_message(fake_daemon *daemon, void *context)
{
    (void)context;
    if (!fake_connect(daemon, &first) || !fake_opened(daemon, &first, SESSION, 0, 0) ||
        !fake_expect(daemon, &first, IPC_OP_PING))
        return;
    ipc_buffer event = {0};
    ipc_frame_begin(&event, IPC_OP_EVENT_LINK_STATE, 0);
    ipc_put_u8(&event, IPC_TAG_LINK_STATE, 0);
    fake_write(daemon, &first, &event);
    ipc_frame_begin(&event, IPC_OP_EVENT_ACKED, 0);
    ipc_put_u64(&event, IPC_TAG_SESSION, SESSION);
    ipc_put_u64(&event, IPC_TAG_SEQ, 3);
    fake_write(daemon, &first, &event);
    ipc_frame_begin(&event, IPC_OP_EVENT_EXPIRED, 0);
    ipc_put_u64(&event, IPC_TAG_SESSION, SESSION);
    ipc_put_u64(&event, IPC_TAG_SEQ, 4);
    ipc_put_u16(&event, IPC_TAG_CODE, 13);
    char long_text[600];
    memset(long_text, 'a', sizeof long_text);
    memcpy(long_text + 510, "\xc3\xa9", 2); /* é on bytes 510-511: the 511 the event text holds would split it */
    ipc_put_bytes(&event, IPC_TAG_MESSAGE, long_text, sizeof long_text);
    fake_write(daemon, &first, &event);
    ipc_frame_begin(&event, 0x9077, 0); /* an event of a newer daemon */
    fake_write(daemon, &first, &event);
    fake_reply(daemon, &first, IPC_OP_PONG);
    fake_message(daemon, &first, SESSION, 1, "later");
    fake_expect(daemon, &first, IPC_OP_ACK);
    fake_close(&first);
}

static void reports_events_and_works_from_an_event_loop(void)
{
    fixture f;
    CHECK(start(&f, events_then_a_message, NULL));
    seen_events seen = {.link_state = -1};
    imagent_set_event_callback(f.client, remember_event, &seen);
    f.opened = imagent_open(f.client, "echo", &f.session);
    int pinged = imagent_ping(f.client);
    /* The loop: poll the fd, process, take what was queued. */
    imagent_message message = {0};
    int received = IMAGENT_ERR_TIMEDOUT;
    for (int round = 0; round < 50 && received == IMAGENT_ERR_TIMEDOUT; round++) {
        struct pollfd watched = {.fd = imagent_fd(f.client), .events = POLLIN};
        poll(&watched, 1, 100);
        if (imagent_process(f.client) < 0)
            break;
        received = imagent_receive(f.client, &message, 0);
    }
    int acked = received == 0 ? imagent_ack(f.client, message.session, message.seq) : received;
    bool later = received == 0 && message.length == 5 && memcmp(message.payload, "later", 5) == 0;
    imagent_message_release(&message);
    CHECK(finish(&f) == 0);
    CHECK(f.opened == 0 && pinged == 0);
    CHECK(seen.link_state == IMAGENT_LINK_DISCONNECTED);
    CHECK(seen.acked_seq == 3);
    CHECK(seen.expired_code == IMAGENT_ERR_EXPIRED);
    CHECK(seen.expired_text_length == 510); /* cut before the é, not inside it */
    CHECK(seen.count == 3);
    CHECK(later && acked == 0);
}

/* ---- surviving the daemon --------------------------------------------- */

/* The first connection takes a SEND and dies without answering; the second
 * says in OPENED's SENT_SEQ whether it was stored. */
static void lose_a_send_in_flight(fake_daemon *daemon, void *context)
{
    bool stored = *(bool *)context;
    if (!fake_connect(daemon, &first) || !fake_opened(daemon, &first, SESSION, 4, 0) ||
        !fake_expect(daemon, &first, IPC_OP_SEND))
        return;
    fake_close(&first); /* kill -9 */
    if (!fake_connect(daemon, &second) || !fake_opened(daemon, &second, SESSION, stored ? 5 : 4, 0))
        return;
    if (ipc_frame_uint(&second.frame, IPC_TAG_SESSION) != SESSION)
        fake_fail(daemon, "re-attach was not OPEN with SESSION");
    if (!stored) {
        if (!fake_expect(daemon, &second, IPC_OP_SEND))
            return;
        fake_accepted(daemon, &second, SESSION, 5);
    }
    /* A stored message must not come again: the next frame is the PING. */
    fake_expect(daemon, &second, IPC_OP_PING);
    fake_reply(daemon, &second, IPC_OP_PONG);
    fake_close(&second);
}

typedef struct survival_events {
    int disconnected;
    int reconnected;
} survival_events;

static void count_survival(const imagent_event *event, void *user_data)
{
    survival_events *seen = user_data;
    seen->disconnected += event->type == IMAGENT_EVENT_DISCONNECTED;
    seen->reconnected += event->type == IMAGENT_EVENT_RECONNECTED;
}

/* How many file descriptors the process has open. */
static int open_fd_count(void)
{
    DIR *listing = opendir("/proc/self/fd");
    if (!listing)
        return -1;
    int count = 0;
    while (readdir(listing))
        count++;
    closedir(listing);
    return count;
}

/* Whether fd is closed in a child after exec, and never blocks the program. */
static bool close_on_exec_and_non_blocking(int fd)
{
    int descriptor_flags = fcntl(fd, F_GETFD);
    int status_flags = fcntl(fd, F_GETFL);
    return descriptor_flags >= 0 && (descriptor_flags & FD_CLOEXEC) && status_flags >= 0 &&
           (status_flags & O_NONBLOCK);
}

static void resolve_send_in_flight(bool stored)
{
    int fds_before = open_fd_count();
    fixture f;
    CHECK(start(&f, lose_a_send_in_flight, &stored));
    survival_events seen = {0};
    imagent_set_event_callback(f.client, count_survival, &seen);
    uint64_t seq = 0;
    f.opened = imagent_open(f.client, "echo", &f.session);
    bool first_socket_flags = close_on_exec_and_non_blocking(imagent_fd(f.client));
    int sent = imagent_send(f.client, f.session, "once", 4, &seq);
    bool second_socket_flags = close_on_exec_and_non_blocking(imagent_fd(f.client));
    int pinged = imagent_ping(f.client);
    CHECK(finish(&f) == 0);
    CHECK(f.opened == 0);
    CHECK(sent == 0 && seq == 5);
    CHECK(pinged == 0);
    CHECK(seen.disconnected == 1 && seen.reconnected == 1);
    CHECK(first_socket_flags && second_socket_flags);
    CHECK(open_fd_count() == fds_before); /* the lost socket was closed, and the new one by imagent_free() */
}

static void returns_the_seq_of_a_send_in_flight_the_daemon_stored(void)
{
    resolve_send_in_flight(true);
}

static void sends_again_a_send_in_flight_the_daemon_did_not_store(void)
{
    resolve_send_in_flight(false);
}

static void redeliver_after_a_restart(fake_daemon *daemon, void *context)
{
    (void)context;
    if (!fake_connect(daemon, &first) || !fake_opened(daemon, &first, SESSION, 0, 0))
        return;
    fake_message(daemon, &first, SESSION, 1, "one");
    fake_message(daemon, &first, SESSION, 2, "two");
    /* The client takes both and acks 2; the daemon dies before storing that
     * ack, and before answering the PING. */
    fake_expect(daemon, &first, IPC_OP_ACK);
    fake_expect(daemon, &first, IPC_OP_PING);
    fake_close(&first);
    if (!fake_connect(daemon, &second) || !fake_opened(daemon, &second, SESSION, 0, 0))
        return;
    /* DELIVERED_SEQ 0 < the client's ack: it must say it again. */
    if (!fake_expect(daemon, &second, IPC_OP_ACK))
        return;
    if (ipc_frame_uint(&second.frame, IPC_TAG_SEQ) != 2)
        fake_fail(daemon, "the repeated ACK is not for seq 2");
    fake_expect(daemon, &second, IPC_OP_PING);
    fake_reply(daemon, &second, IPC_OP_PONG);
    fake_message(daemon, &second, SESSION, 1, "one");
    fake_message(daemon, &second, SESSION, 2, "two");
    fake_message(daemon, &second, SESSION, 3, "three");
    fake_expect(daemon, &second, IPC_OP_ACK);
    fake_expect_end(daemon, &second);
    fake_close(&second);
}

static void drops_redelivered_messages_and_repeats_a_lost_ack(void)
{
    fixture f;
    CHECK(start_with_session(&f, redeliver_after_a_restart, NULL));
    imagent_message one, two, three;
    int got_one = imagent_receive(f.client, &one, 5000);
    int got_two = imagent_receive(f.client, &two, 5000);
    int acked = imagent_ack(f.client, f.session, 2);
    imagent_message_release(&one);
    imagent_message_release(&two);
    int pinged = imagent_ping(f.client); /* the daemon dies under it; answered by the next one */
    int got_three = imagent_receive(f.client, &three, 5000);
    uint64_t third_seq = got_three == 0 ? three.seq : 0;
    int acked_three = got_three == 0 ? imagent_ack(f.client, f.session, three.seq) : got_three;
    imagent_message_release(&three);
    imagent_message nothing;
    int got_more = imagent_receive(f.client, &nothing, 200);
    CHECK(finish(&f) == 0);
    CHECK(f.opened == 0 && got_one == 0 && got_two == 0 && acked == 0);
    CHECK(pinged == 0);
    CHECK(got_three == 0 && third_seq == 3 && acked_three == 0);
    CHECK(got_more == IMAGENT_ERR_TIMEDOUT);
}

static void never_answer(fake_daemon *daemon, void *context)
{
    (void)context;
    if (!fake_connect(daemon, &first))
        return;
    fake_expect(daemon, &first, IPC_OP_PING);
    fake_expect_end(daemon, &first); /* nothing more until imagent_free() hangs up */
    fake_close(&first);
}

static void times_out_a_request_the_daemon_does_not_answer(void)
{
    fixture f;
    CHECK(start(&f, never_answer, NULL));
    imagent_set_timeout(f.client, 200);
    int pinged = imagent_ping(f.client);
    CHECK(finish(&f) == 0);
    CHECK(pinged == IMAGENT_ERR_TIMEDOUT);
}

#define FLOOD (IMAGENT_QUEUE_HARD_MESSAGES + 10)

/* Writes messages 1..FLOOD of SESSION. */
static void flood(fake_daemon *daemon, fake_connection *conn)
{
    for (uint64_t seq = 1; seq <= FLOOD; seq++)
        fake_message(daemon, conn, SESSION, seq, "m");
}

static void flood_while_a_reply_is_awaited(fake_daemon *daemon, void *context)
{
    (void)context;
    if (!fake_connect(daemon, &first) || !fake_opened(daemon, &first, SESSION, 0, 0) ||
        !fake_expect(daemon, &first, IPC_OP_PING))
        return;
    /* More than the library keeps, all before the reply it waits for. */
    flood(daemon, &first);
    fake_reply(daemon, &first, IPC_OP_PONG);
    /* Once the program has taken what was kept, the library reconnects for
     * the rest: every message comes again, as after any re-attach. */
    if (!fake_connect(daemon, &second) || !fake_opened(daemon, &second, SESSION, 0, 0))
        return;
    flood(daemon, &second);
    if (fake_expect(daemon, &second, IPC_OP_ACK) && ipc_frame_uint(&second.frame, IPC_TAG_SEQ) != FLOOD)
        fake_fail(daemon, "the last ACK is not for the last message");
    fake_expect_end(daemon, &second);
    fake_close(&first);
    fake_close(&second);
}

static void bounds_its_queue_and_fetches_what_it_dropped_again(void)
{
    fixture f;
    CHECK(start_with_session(&f, flood_while_a_reply_is_awaited, NULL));
    int pinged = imagent_ping(f.client);
    uint64_t expected = 1;
    bool in_order = true;
    imagent_message message;
    while (expected <= FLOOD && imagent_receive(f.client, &message, 5000) == 0) {
        in_order = in_order && message.seq == expected;
        expected++;
        imagent_message_release(&message);
    }
    int acked = imagent_ack(f.client, f.session, FLOOD);
    int more = imagent_receive(f.client, &message, 200);
    CHECK(finish(&f) == 0);
    CHECK(f.opened == 0 && pinged == 0);
    CHECK(in_order && expected == FLOOD + 1);
    CHECK(acked == 0 && more == IMAGENT_ERR_TIMEDOUT);
}

void run_client_tests(void)
{
    RUN(connects_with_a_name_cut_at_a_utf8_boundary_and_a_capped_max_payload);
    RUN(reports_unavailable_without_a_daemon);
    RUN(resolves_the_socket_path_from_the_environment);
    RUN(opens_sends_receives_acks_and_closes);
    RUN(maps_error_replies_and_unknown_codes);
    RUN(refuses_an_oversize_frame_from_the_daemon);
    RUN(a_message_outlives_its_client_and_a_second_release_is_harmless);
    RUN(reports_events_and_works_from_an_event_loop);
    RUN(returns_the_seq_of_a_send_in_flight_the_daemon_stored);
    RUN(sends_again_a_send_in_flight_the_daemon_did_not_store);
    RUN(drops_redelivered_messages_and_repeats_a_lost_ack);
    RUN(times_out_a_request_the_daemon_does_not_answer);
    RUN(bounds_its_queue_and_fetches_what_it_dropped_again);
}
