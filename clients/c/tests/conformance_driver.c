/*
 * conformance_driver.c - libimagent's driver for the client conformance suite
 * (clients/conformance/README.md): runs one scenario against a real imagentd
 * and reports on standard output, one JSON object per line. It uses the
 * public API only, as any program would.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "imagent.h"

typedef struct options {
    const char *socket_path;
    const char *scenario;
    const char *service;
    long messages;
    long size;
    long sessions;
    uint64_t session;
    long timeout_ms;
} options;

static options opts = {NULL, NULL, "echo", 100, 64, 1, 0, 120000};
static int64_t scenario_deadline_ms;

static int64_t now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static int64_t now_us(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

static int remaining_ms(void)
{
    int64_t left = scenario_deadline_ms - now_ms();
    return left < 0 ? 0 : (left > 1000000000 ? 1000000000 : (int)left);
}

static bool time_is_up(void)
{
    return remaining_ms() == 0;
}

/* Every blocking call gets what is left of the scenario's time. */
static void bound(imagent_client *client)
{
    imagent_set_timeout(client, remaining_ms());
}

static void emit_line(const char *line)
{
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* ---- errors, counted by name ---------------------------------------- */

typedef struct error_count {
    const char *name;
    long count;
} error_count;
static error_count error_counts[32];
static size_t error_kinds;

static void count_error(int code)
{
    const char *name = imagent_error_name(code);
    for (size_t i = 0; i < error_kinds; i++)
        if (strcmp(error_counts[i].name, name) == 0) {
            error_counts[i].count++;
            return;
        }
    if (error_kinds < sizeof error_counts / sizeof error_counts[0])
        error_counts[error_kinds++] = (error_count){name, 1};
}

static void format_errors(char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "{");
    for (size_t i = 0; i < error_kinds && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s\"%s\":%ld", i ? "," : "", error_counts[i].name,
                                 error_counts[i].count);
    if (used < size)
        snprintf(out + used, size - used, "}");
}

/* ---- payloads -------------------------------------------------------- */

/* Message i: i as a big-endian u64, then the byte i % 251 repeated. */
static void fill_payload(uint8_t *payload, size_t size, uint64_t counter)
{
    for (int i = 0; i < 8; i++)
        payload[i] = (uint8_t)(counter >> (8 * (7 - i)));
    memset(payload + 8, (int)(counter % 251), size - 8);
}

/* The counter of an intact payload of `size` bytes, or 0 when corrupt. */
static uint64_t payload_counter(const uint8_t *payload, size_t length, size_t size)
{
    if (length != size || length < 8)
        return 0;
    uint64_t counter = 0;
    for (int i = 0; i < 8; i++)
        counter = counter << 8 | payload[i];
    for (size_t i = 8; i < length; i++)
        if (payload[i] != counter % 251)
            return 0;
    return counter;
}

/* ---- the stream report ------------------------------------------------ */

typedef struct stream {
    uint64_t session;
    long sent;
    bool seqs_in_order;
    uint64_t next_seq; /* the seq the next send must return */
    long received;
    long duplicates;
    long gaps;
    long corrupt;
    uint64_t next_counter; /* the counter the next echo must carry */
} stream;

static long reconnects;

static void on_event(const imagent_event *event, void *user_data)
{
    (void)user_data;
    if (event->type == IMAGENT_EVENT_RECONNECTED)
        reconnects++;
}

static void stream_init(stream *s, uint64_t session)
{
    memset(s, 0, sizeof *s);
    s->session = session;
    s->seqs_in_order = true;
    s->next_seq = 1;
    s->next_counter = 1;
}

static void note_accepted(stream *s, uint64_t seq)
{
    s->sent++;
    if (seq != s->next_seq)
        s->seqs_in_order = false;
    s->next_seq = seq + 1;
}

static void take_echo(stream *s, const imagent_message *message)
{
    uint64_t counter = payload_counter(message->payload, message->length, (size_t)opts.size);
    if (counter == 0) {
        s->corrupt++;
    } else if (counter == s->next_counter) {
        s->received++;
        s->next_counter++;
        if (s->received % 500 == 0 && strcmp(opts.scenario, "stream") == 0) {
            char line[128];
            snprintf(line, sizeof line, "{\"event\":\"progress\",\"sent\":%ld,\"received\":%ld}", s->sent,
                     s->received);
            emit_line(line);
        }
    } else if (counter < s->next_counter) {
        s->duplicates++;
    } else {
        s->gaps++;
        s->next_counter = counter + 1;
    }
}

/* Receives what comes within timeout_ms (0: what is there now), acking each. */
static void receive_echoes(imagent_client *client, stream *s, int timeout_ms)
{
    for (;;) {
        imagent_message message;
        bound(client);
        int result = imagent_receive(client, &message, timeout_ms);
        if (result == IMAGENT_ERR_TIMEDOUT)
            return;
        if (result < 0) {
            count_error(result);
            return;
        }
        if (message.session == s->session)
            take_echo(s, &message);
        else
            s->corrupt++;
        int acked = imagent_ack(client, message.session, message.seq);
        if (acked < 0)
            count_error(acked);
        imagent_message_release(&message);
        timeout_ms = 0; /* after the first, take what is already there */
    }
}

static void receive_all_echoes(imagent_client *client, stream *s)
{
    while (s->next_counter <= (uint64_t)s->sent && !time_is_up())
        receive_echoes(client, s, remaining_ms());
}

static void report_stream(const stream *s, const char *extra)
{
    char errors[1024];
    format_errors(errors, sizeof errors);
    char line[2048];
    snprintf(line, sizeof line,
             "{\"scenario\":\"%s\",\"session\":%" PRIu64 ",\"sent\":%ld,\"seqs_in_order\":%s,\"received\":%ld,"
             "\"duplicates\":%ld,\"gaps\":%ld,\"corrupt\":%ld,\"reconnects\":%ld,\"errors\":%s%s}",
             opts.scenario, s->session, s->sent, s->seqs_in_order ? "true" : "false", s->received, s->duplicates,
             s->gaps, s->corrupt, reconnects, errors, extra ? extra : "");
    emit_line(line);
}

static void fail(const char *what, int code)
{
    char line[512];
    snprintf(line, sizeof line, "{\"scenario\":\"%s\",\"error\":\"%s: %s (%s)\"}", opts.scenario, what,
             imagent_error_name(code), imagent_strerror(code));
    emit_line(line);
    exit(1);
}

static uint64_t open_session(imagent_client *client, const char *service)
{
    uint64_t session = 0;
    bound(client);
    int result = imagent_open(client, service, &session);
    if (result < 0)
        fail("open", result);
    return session;
}

/* ---- scenarios -------------------------------------------------------- */

typedef enum send_style {
    SEND_ONCE,           /* echo, large, stream, server-down: an error is counted, the message skipped */
    RETRY_WHEN_FULL,     /* queue-full: QUEUE_FULL is retried every 50 ms */
} send_style;

/* Sends message `counter`; true once ACCEPTED. */
static bool send_message(imagent_client *client, stream *s, uint8_t *payload, uint64_t counter, send_style style,
                         long *accepted_before_full)
{
    fill_payload(payload, (size_t)opts.size, counter);
    for (;;) {
        uint64_t seq = 0;
        bound(client);
        int result = imagent_send(client, s->session, payload, (size_t)opts.size, &seq);
        if (result == 0) {
            note_accepted(s, seq);
            return true;
        }
        count_error(result);
        if (style != RETRY_WHEN_FULL || result != IMAGENT_ERR_QUEUE_FULL || time_is_up())
            return false;
        if (*accepted_before_full < 0) {
            *accepted_before_full = s->sent;
            char line[96];
            snprintf(line, sizeof line, "{\"event\":\"queue_full\",\"accepted\":%ld}", s->sent);
            emit_line(line);
        }
        receive_echoes(client, s, 0);
        struct timespec pause = {0, 50 * 1000000};
        nanosleep(&pause, NULL);
    }
}

static uint8_t *payload_buffer(long size)
{
    uint8_t *payload = malloc((size_t)size + 1);
    if (!payload)
        fail("payload", IMAGENT_ERR_NO_MEMORY);
    return payload;
}

static int run_stream(imagent_client *client)
{
    bool queue_full = strcmp(opts.scenario, "queue-full") == 0;
    bool server_down = strcmp(opts.scenario, "server-down") == 0;
    stream s;
    stream_init(&s, open_session(client, opts.service));
    uint8_t *payload = payload_buffer(opts.size);
    long accepted_before_full = -1;
    for (long i = 1; i <= opts.messages && !time_is_up(); i++) {
        send_message(client, &s, payload, (uint64_t)i, queue_full ? RETRY_WHEN_FULL : SEND_ONCE,
                     &accepted_before_full);
        if (!server_down)
            receive_echoes(client, &s, 0);
    }
    if (server_down) {
        char line[96];
        snprintf(line, sizeof line, "{\"event\":\"accepted\",\"count\":%ld}", s.sent);
        emit_line(line);
    }
    receive_all_echoes(client, &s);

    char extra[128] = "";
    if (strcmp(opts.scenario, "large") == 0) {
        fill_payload(payload, (size_t)opts.size + 1, (uint64_t)opts.messages + 1);
        bound(client);
        int result = imagent_send(client, s.session, payload, (size_t)opts.size + 1, NULL);
        snprintf(extra, sizeof extra, ",\"too_large\":\"%s\"", result == 0 ? "accepted" : imagent_error_name(result));
    } else if (queue_full) {
        snprintf(extra, sizeof extra, ",\"accepted_before_full\":%ld",
                 accepted_before_full < 0 ? s.sent : accepted_before_full);
    }
    free(payload);
    report_stream(&s, extra);
    return 0;
}

static int run_sessions(imagent_client *client)
{
    long count = opts.sessions > 0 ? opts.sessions : 1;
    uint64_t *ids = calloc((size_t)count, sizeof *ids);
    bool *echoed = calloc((size_t)count, sizeof *echoed);
    uint8_t *payload = payload_buffer(opts.size);
    if (!ids || !echoed)
        fail("sessions", IMAGENT_ERR_NO_MEMORY);
    long opened = 0, sent = 0, received = 0, wrong = 0;
    for (long i = 0; i < count && !time_is_up(); i++) {
        bound(client);
        int result = imagent_open(client, opts.service, &ids[i]);
        if (result < 0) {
            count_error(result);
            continue;
        }
        opened++;
    }
    fill_payload(payload, (size_t)opts.size, 1);
    for (long i = 0; i < count && !time_is_up(); i++) {
        if (ids[i] == 0)
            continue;
        bound(client);
        int result = imagent_send(client, ids[i], payload, (size_t)opts.size, NULL);
        if (result < 0)
            count_error(result);
        else
            sent++;
    }
    while (received < sent && !time_is_up()) {
        imagent_message message;
        int result = imagent_receive(client, &message, remaining_ms());
        if (result < 0) {
            if (result != IMAGENT_ERR_TIMEDOUT)
                count_error(result);
            continue;
        }
        long index = -1;
        for (long i = 0; i < count; i++)
            if (ids[i] != 0 && ids[i] == message.session)
                index = i;
        if (index < 0 || echoed[index] || payload_counter(message.payload, message.length, (size_t)opts.size) != 1) {
            wrong++;
        } else {
            echoed[index] = true;
            received++;
        }
        int acked = imagent_ack(client, message.session, message.seq);
        if (acked < 0)
            count_error(acked);
        imagent_message_release(&message);
    }
    char errors[1024];
    format_errors(errors, sizeof errors);
    char line[1400];
    snprintf(line, sizeof line,
             "{\"scenario\":\"sessions\",\"opened\":%ld,\"sent\":%ld,\"received\":%ld,\"wrong\":%ld,\"errors\":%s}",
             opened, sent, received, wrong, errors);
    emit_line(line);
    free(ids);
    free(echoed);
    free(payload);
    return 0;
}

static int run_open(imagent_client *client)
{
    uint64_t session = open_session(client, opts.service);
    char line[128];
    snprintf(line, sizeof line, "{\"scenario\":\"open\",\"session\":%" PRIu64 "}", session);
    emit_line(line);
    return 0;
}

static const char *outcome(int result)
{
    return result == 0 ? "ok" : imagent_error_name(result);
}

static int run_attach(imagent_client *client)
{
    bound(client);
    int attached = imagent_attach(client, opts.session);
    uint8_t *payload = payload_buffer(opts.size);
    fill_payload(payload, (size_t)opts.size, 1);
    bound(client);
    int sent = imagent_send(client, opts.session, payload, (size_t)opts.size, NULL);
    bound(client);
    int closed = imagent_close(client, opts.session);
    free(payload);
    char line[256];
    snprintf(line, sizeof line, "{\"scenario\":\"attach\",\"attach\":\"%s\",\"send\":\"%s\",\"close\":\"%s\"}",
             outcome(attached), outcome(sent), outcome(closed));
    emit_line(line);
    return 0;
}

static int compare_durations(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int run_bench(imagent_client *client)
{
    uint8_t *payload = payload_buffer(opts.size);
    uint64_t sink = open_session(client, "sink");
    int64_t started = now_us();
    long sent = 0;
    for (long i = 1; i <= opts.messages && !time_is_up(); i++) {
        fill_payload(payload, (size_t)opts.size, (uint64_t)i);
        bound(client);
        int result = imagent_send(client, sink, payload, (size_t)opts.size, NULL);
        if (result < 0)
            fail("send to sink", result);
        sent++;
    }
    double seconds = (double)(now_us() - started) / 1e6;
    double oneway = seconds > 0 ? (double)sent / seconds : 0;

    uint64_t echo = open_session(client, "echo");
    long rounds = opts.messages / 10 < 100 ? 100 : opts.messages / 10;
    int64_t *durations = calloc((size_t)rounds, sizeof *durations);
    if (!durations)
        fail("bench", IMAGENT_ERR_NO_MEMORY);
    long done = 0;
    for (long i = 1; i <= rounds && !time_is_up(); i++) {
        fill_payload(payload, (size_t)opts.size, (uint64_t)i);
        int64_t round_started = now_us();
        bound(client);
        int result = imagent_send(client, echo, payload, (size_t)opts.size, NULL);
        if (result < 0)
            fail("send to echo", result);
        imagent_message message;
        result = imagent_receive(client, &message, remaining_ms());
        if (result < 0)
            fail("receive the echo", result);
        imagent_ack(client, message.session, message.seq);
        imagent_message_release(&message);
        durations[done++] = now_us() - round_started;
    }
    qsort(durations, (size_t)done, sizeof *durations, compare_durations);
    int64_t p50 = done ? durations[done / 2] : 0;
    int64_t p99 = done ? durations[(done * 99) / 100 < done ? (done * 99) / 100 : done - 1] : 0;
    char line[256];
    snprintf(line, sizeof line,
             "{\"scenario\":\"bench\",\"size\":%ld,\"oneway_msgs_per_s\":%.0f,\"rtt_p50_us\":%" PRId64
             ",\"rtt_p99_us\":%" PRId64 "}",
             opts.size, oneway, p50, p99);
    emit_line(line);
    /* The daemon may serve more runs: leave nothing behind. */
    bound(client);
    imagent_close(client, sink);
    imagent_close(client, echo);
    free(durations);
    free(payload);
    return 0;
}

/* ---- the command line ------------------------------------------------- */

static void usage(const char *problem)
{
    char line[512];
    snprintf(line, sizeof line,
             "{\"scenario\":\"%s\",\"error\":\"usage: %s; DRIVER --socket PATH SCENARIO [--service NAME] "
             "[--messages N] [--size BYTES] [--sessions K] [--session ID] [--timeout-ms MS]\"}",
             opts.scenario ? opts.scenario : "", problem);
    emit_line(line);
    exit(2);
}

static long number(const char *text, long minimum)
{
    char *end;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < minimum)
        usage("a number is out of range");
    return value;
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        if (strncmp(arg, "--", 2) == 0 && !has_value)
            usage("an option lacks its value");
        if (strcmp(arg, "--socket") == 0)
            opts.socket_path = argv[++i];
        else if (strcmp(arg, "--service") == 0)
            opts.service = argv[++i];
        else if (strcmp(arg, "--messages") == 0)
            opts.messages = number(argv[++i], 0);
        else if (strcmp(arg, "--size") == 0)
            opts.size = number(argv[++i], 8);
        else if (strcmp(arg, "--sessions") == 0)
            opts.sessions = number(argv[++i], 1);
        else if (strcmp(arg, "--session") == 0)
            opts.session = strtoull(argv[++i], NULL, 10);
        else if (strcmp(arg, "--timeout-ms") == 0)
            opts.timeout_ms = number(argv[++i], 1);
        else if (strncmp(arg, "--", 2) == 0)
            usage("unknown option");
        else if (!opts.scenario)
            opts.scenario = arg;
        else
            usage("more than one scenario");
    }
    if (!opts.scenario)
        usage("no scenario");
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    scenario_deadline_ms = now_ms() + opts.timeout_ms;
    static const struct {
        const char *name;
        int (*run)(imagent_client *);
    } scenarios[] = {
        {"echo", run_stream},      {"large", run_stream},   {"queue-full", run_stream},
        {"server-down", run_stream}, {"stream", run_stream}, {"sessions", run_sessions},
        {"open", run_open},        {"attach", run_attach},  {"bench", run_bench},
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        if (strcmp(scenarios[i].name, opts.scenario) != 0)
            continue;
        imagent_client *client = NULL;
        int result = imagent_connect(&client, opts.socket_path, "imagent-conformance-c");
        if (result < 0)
            fail("connect", result);
        imagent_set_event_callback(client, on_event, NULL);
        int status = scenarios[i].run(client);
        imagent_free(client);
        return status;
    }
    usage("unknown scenario");
    return 2;
}
