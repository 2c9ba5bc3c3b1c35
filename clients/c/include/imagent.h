/*
 * imagent.h - libimagent, the C client of imagentd (Agent IPC/1).
 *
 * A program connects to the local daemon, opens or attaches sessions (logical
 * channels to a service on the IM server), sends messages that the daemon
 * stores durably before it answers, and receives messages that it
 * acknowledges. See libimagent(3) for the overview and one page per function
 * family for the details.
 *
 * Conventions: every call that can fail returns 0 on success and a negative
 * IMAGENT_ERR_* code otherwise; imagent_strerror() explains a code. Handles
 * are opaque.
 *
 * Thread safety: a handle may be used by one thread at a time (calls on one
 * handle must not overlap; the caller serialises them if it shares the
 * handle). Different handles are independent. imagent_strerror() and
 * imagent_error_name() may be called from any thread at any time.
 *
 * Surviving the daemon: when the connection drops or imagentd restarts, the
 * library reconnects within the timeout of the call that notices, attaches
 * again every session it had attached, resolves a send in flight from the
 * session's SENT_SEQ (exact when this handle is the session's only sender) and
 * drops messages it already handed to the program. See libimagent(3).
 *
 * Bounded memory: received messages wait in a queue; at 1024 messages or
 * 16 MiB the library stops reading the socket (the daemon keeps the rest)
 * except to find a reply it waits for. See libimagent(3), BOUNDED MEMORY.
 */
#ifndef IMAGENT_H
#define IMAGENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IMAGENT_VERSION_MAJOR 0
#define IMAGENT_VERSION_MINOR 1
#define IMAGENT_VERSION_PATCH 0
#define IMAGENT_VERSION "0.1.0"

#if defined(__GNUC__)
#define IMAGENT_API __attribute__((visibility("default")))
#else
#define IMAGENT_API
#endif

/* Error codes. -1 .. -13 are the daemon's IPC error codes (imagent-ipc(7),
 * ERROR CODES), negated; a code the library does not know arrives as
 * IMAGENT_ERR_INTERNAL. The library's own start at -100. */
enum {
    IMAGENT_OK = 0,
    IMAGENT_ERR_BAD_REQUEST = -1,
    IMAGENT_ERR_VERSION_UNSUPPORTED = -2,
    IMAGENT_ERR_UNKNOWN_SESSION = -3,
    IMAGENT_ERR_PERMISSION_DENIED = -4,
    IMAGENT_ERR_SESSION_BUSY = -5,
    IMAGENT_ERR_QUEUE_FULL = -6,
    IMAGENT_ERR_PAYLOAD_TOO_LARGE = -7,
    IMAGENT_ERR_SHUTTING_DOWN = -8,
    IMAGENT_ERR_INTERNAL = -9,
    IMAGENT_ERR_UPSTREAM_REJECTED = -10,
    IMAGENT_ERR_SESSION_CLOSED = -11,
    IMAGENT_ERR_LIMIT_REACHED = -12,
    IMAGENT_ERR_EXPIRED = -13,

    IMAGENT_ERR_UNAVAILABLE = -100,      /* the daemon cannot be reached */
    IMAGENT_ERR_TIMEDOUT = -101,         /* the call's timeout passed */
    IMAGENT_ERR_INVALID_ARGUMENT = -102, /* a NULL handle, an empty service, ... */
    IMAGENT_ERR_NO_MEMORY = -103,
    IMAGENT_ERR_PROTOCOL = -104,         /* the daemon sent something malformed */
    IMAGENT_ERR_SYSTEM = -105,           /* a system call failed; see errno */
    IMAGENT_ERR_OUTCOME_UNKNOWN = -106   /* lost with the connection; may have happened */
};

/* Session priorities and link states (imagent-ipc(7), RECORD TAGS). */
enum { IMAGENT_PRIORITY_HIGH = 0, IMAGENT_PRIORITY_NORMAL = 1, IMAGENT_PRIORITY_LOW = 2 };
enum {
    IMAGENT_LINK_DISCONNECTED = 0,
    IMAGENT_LINK_CONNECTING = 1,
    IMAGENT_LINK_CONNECTED = 2,
    IMAGENT_LINK_DISCONNECTING = 3
};
enum {
    IMAGENT_SESSION_PENDING = 0,
    IMAGENT_SESSION_OPEN = 1,
    IMAGENT_SESSION_PAUSED = 2,
    IMAGENT_SESSION_FAILED = 3,
    IMAGENT_SESSION_CLOSED = 4
};

typedef struct imagent_client imagent_client;

/* A received message. payload points into memory the library owns until
 * imagent_message_release(). */
typedef struct imagent_message {
    uint64_t session;
    uint64_t seq;
    const uint8_t *payload;
    size_t length;
    void *internal; /* the library's; do not touch */
} imagent_message;

/* Events, delivered to the callback set with imagent_set_event_callback(). */
typedef enum imagent_event_type {
    IMAGENT_EVENT_LINK_STATE = 1,    /* state: the daemon's link to the server */
    IMAGENT_EVENT_SESSION_STATE = 2, /* session, state, code (0 or negative), message */
    IMAGENT_EVENT_ACKED = 3,         /* session, seq: the server holds every message up to seq */
    IMAGENT_EVENT_EXPIRED = 4,       /* session, seq, code, message: a message was given up */
    IMAGENT_EVENT_DISCONNECTED = 5,  /* the connection to the daemon was lost */
    IMAGENT_EVENT_RECONNECTED = 6,   /* connected again; sessions attached again */
    IMAGENT_EVENT_ERROR = 7          /* code, message: an ERROR with no request (e.g. a failed ack) */
} imagent_event_type;

typedef struct imagent_event {
    imagent_event_type type;
    uint64_t session;
    uint64_t seq;
    int state;
    int code;            /* 0 or a negative IMAGENT_ERR_* code */
    const char *message; /* NULL or text valid during the callback only */
} imagent_event;

/* Called from inside whichever call read the event; it must not call the
 * library on the same handle. */
typedef void (*imagent_event_callback)(const imagent_event *event, void *user_data);

/* Connecting (imagent_connect(3)). socket_path NULL: $IMAGENT_SOCKET, else
 * /run/imagent/imagent.sock if it exists, else $XDG_RUNTIME_DIR/imagent/
 * imagent.sock if it exists, else the system path; PATH.admin is tried first.
 * client_name may be NULL; it is cut to 128 bytes at a UTF-8 boundary. */
IMAGENT_API int imagent_connect(imagent_client **out, const char *socket_path, const char *client_name);
IMAGENT_API void imagent_free(imagent_client *client);
/* The default timeout of blocking calls, in ms; -1 waits for ever. 30000 at first. */
IMAGENT_API int imagent_set_timeout(imagent_client *client, int timeout_ms);
IMAGENT_API const char *imagent_daemon_version(const imagent_client *client);
IMAGENT_API uint32_t imagent_max_payload(const imagent_client *client);
IMAGENT_API int imagent_link_state(const imagent_client *client);

/* Sessions (imagent_open(3)). */
IMAGENT_API int imagent_open(imagent_client *client, const char *service, uint64_t *session);
IMAGENT_API int imagent_open_ex(imagent_client *client, const char *service, int priority, int durable,
                                uint64_t *session);
IMAGENT_API int imagent_attach(imagent_client *client, uint64_t session);
IMAGENT_API int imagent_detach(imagent_client *client, uint64_t session);
IMAGENT_API int imagent_close(imagent_client *client, uint64_t session);

/* Sending (imagent_send(3)): returns once the daemon stored the message. */
IMAGENT_API int imagent_send(imagent_client *client, uint64_t session, const void *payload, size_t length,
                             uint64_t *seq);
IMAGENT_API int imagent_send_ttl(imagent_client *client, uint64_t session, const void *payload, size_t length,
                                 uint32_t ttl_ms, uint64_t *seq);

/* Receiving (imagent_receive(3)). timeout_ms 0 polls, -1 waits for ever. */
IMAGENT_API int imagent_receive(imagent_client *client, imagent_message *message, int timeout_ms);
IMAGENT_API void imagent_message_release(imagent_message *message);
IMAGENT_API int imagent_ack(imagent_client *client, uint64_t session, uint64_t seq);
IMAGENT_API int imagent_set_event_callback(imagent_client *client, imagent_event_callback callback,
                                           void *user_data);

/* Event-loop integration (imagent_fd(3)): poll imagent_fd() for reading, then
 * imagent_process() and imagent_receive(..., 0). The fd changes after a
 * reconnect and is -1 while disconnected (call imagent_process() from a timer
 * then: it reconnects). */
IMAGENT_API int imagent_fd(const imagent_client *client);
IMAGENT_API int imagent_process(imagent_client *client);

/* Daemon queries (imagent_status(3)): *json is NUL-terminated, caller free()s. */
IMAGENT_API int imagent_status(imagent_client *client, char **json);
IMAGENT_API int imagent_sessions(imagent_client *client, char **json);
IMAGENT_API int imagent_metrics(imagent_client *client, char **json);
IMAGENT_API int imagent_ping(imagent_client *client);

/* Errors (imagent_strerror(3)). */
IMAGENT_API const char *imagent_strerror(int code);
IMAGENT_API const char *imagent_error_name(int code);

#ifdef __cplusplus
}
#endif

#endif /* IMAGENT_H */
