/*
 * errors.c - error codes: names, explanations, and the daemon's codes mapped.
 */
#include "errors.h"

#include <stddef.h>

#include "imagent.h"

/* Every code the library returns, with its name and its explanation: the
 * daemon's IPC codes (negated) first, then the library's own. */
static const struct error_description {
    int code;
    const char *name;
    const char *text;
} descriptions[] = {
    {IMAGENT_OK, "OK", "success"},
    {IMAGENT_ERR_BAD_REQUEST, "BAD_REQUEST", "the daemon refused a malformed or misplaced request"},
    {IMAGENT_ERR_VERSION_UNSUPPORTED, "VERSION_UNSUPPORTED", "the daemon does not speak this protocol version"},
    {IMAGENT_ERR_UNKNOWN_SESSION, "UNKNOWN_SESSION", "no such session"},
    {IMAGENT_ERR_PERMISSION_DENIED, "PERMISSION_DENIED",
     "permission denied (not the session's owner, or not in group imagent)"},
    {IMAGENT_ERR_SESSION_BUSY, "SESSION_BUSY", "the session is attached to another connection"},
    {IMAGENT_ERR_QUEUE_FULL, "QUEUE_FULL", "the session's outbox is full; nothing was stored, retry later"},
    {IMAGENT_ERR_PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE", "the message is larger than the daemon or the server accepts"},
    {IMAGENT_ERR_SHUTTING_DOWN, "SHUTTING_DOWN", "the daemon is stopping"},
    {IMAGENT_ERR_INTERNAL, "INTERNAL", "the daemon failed internally"},
    {IMAGENT_ERR_UPSTREAM_REJECTED, "UPSTREAM_REJECTED", "the server refused the session or the message"},
    {IMAGENT_ERR_SESSION_CLOSED, "SESSION_CLOSED", "the session was closed and cannot be attached again"},
    {IMAGENT_ERR_LIMIT_REACHED, "LIMIT_REACHED", "too many clients or sessions"},
    {IMAGENT_ERR_EXPIRED, "EXPIRED", "the message's TTL passed before it could be sent"},
    {IMAGENT_ERR_UNAVAILABLE, "DAEMON_UNAVAILABLE", "imagentd is not running or cannot be reached"},
    {IMAGENT_ERR_TIMEDOUT, "TIMED_OUT", "the timeout passed"},
    {IMAGENT_ERR_INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid argument"},
    {IMAGENT_ERR_NO_MEMORY, "NO_MEMORY", "out of memory"},
    {IMAGENT_ERR_PROTOCOL, "PROTOCOL_ERROR", "the daemon sent a malformed or unexpected frame"},
    {IMAGENT_ERR_SYSTEM, "SYSTEM_ERROR", "a system call failed (see errno)"},
    {IMAGENT_ERR_OUTCOME_UNKNOWN, "OUTCOME_UNKNOWN",
     "the connection was lost during the request; it may or may not have taken effect"},
};

/* The highest IPC code the library knows: IMAGENT_ERR_EXPIRED, negated. */
#define LAST_KNOWN_IPC_CODE 13u
_Static_assert(-IMAGENT_ERR_EXPIRED == (int)LAST_KNOWN_IPC_CODE, "the IPC codes end at EXPIRED");

static const struct error_description *describe(int code)
{
    for (size_t i = 0; i < sizeof descriptions / sizeof descriptions[0]; i++)
        if (descriptions[i].code == code)
            return &descriptions[i];
    return NULL;
}

int imagent_code_from_ipc(uint64_t ipc_code)
{
    if (ipc_code >= 1 && ipc_code <= LAST_KNOWN_IPC_CODE)
        return -(int)ipc_code;
    return IMAGENT_ERR_INTERNAL;
}

int imagent_code_from_frame(const ipc_frame *frame)
{
    return imagent_code_from_ipc(ipc_frame_uint(frame, IPC_TAG_CODE));
}

const char *imagent_error_name(int code)
{
    const struct error_description *description = describe(code);
    return description ? description->name : "UNKNOWN_ERROR";
}

const char *imagent_strerror(int code)
{
    const struct error_description *description = describe(code);
    return description ? description->text : "unknown error code";
}
