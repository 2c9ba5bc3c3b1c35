/*
 * errors.c - error codes: names, explanations, and the daemon's codes mapped.
 */
#include "errors.h"

#include "imagent.h"

/* Indexed by -code for the IPC codes 1..13. */
static const struct {
    const char *name;
    const char *text;
} ipc_errors[] = {
    {"OK", "success"},
    {"BAD_REQUEST", "the daemon refused a malformed or misplaced request"},
    {"VERSION_UNSUPPORTED", "the daemon does not speak this protocol version"},
    {"UNKNOWN_SESSION", "no such session"},
    {"PERMISSION_DENIED", "permission denied (not the session's owner, or not in group imagent)"},
    {"SESSION_BUSY", "the session is attached to another connection"},
    {"QUEUE_FULL", "the session's outbox is full; nothing was stored, retry later"},
    {"PAYLOAD_TOO_LARGE", "the message is larger than the daemon or the server accepts"},
    {"SHUTTING_DOWN", "the daemon is stopping"},
    {"INTERNAL", "the daemon failed internally"},
    {"UPSTREAM_REJECTED", "the server refused the session or the message"},
    {"SESSION_CLOSED", "the session was closed and cannot be attached again"},
    {"LIMIT_REACHED", "too many clients or sessions"},
    {"EXPIRED", "the message's TTL passed before it could be sent"},
};

static const struct {
    int code;
    const char *name;
    const char *text;
} library_errors[] = {
    {IMAGENT_ERR_UNAVAILABLE, "DAEMON_UNAVAILABLE", "imagentd is not running or cannot be reached"},
    {IMAGENT_ERR_TIMEDOUT, "TIMED_OUT", "the timeout passed"},
    {IMAGENT_ERR_INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid argument"},
    {IMAGENT_ERR_NO_MEMORY, "NO_MEMORY", "out of memory"},
    {IMAGENT_ERR_PROTOCOL, "PROTOCOL_ERROR", "the daemon sent a malformed or unexpected frame"},
    {IMAGENT_ERR_SYSTEM, "SYSTEM_ERROR", "a system call failed (see errno)"},
    {IMAGENT_ERR_OUTCOME_UNKNOWN, "OUTCOME_UNKNOWN",
     "the connection was lost during the request; it may or may not have taken effect"},
};

#define IPC_ERROR_COUNT ((int)(sizeof ipc_errors / sizeof ipc_errors[0]))
#define LIBRARY_ERROR_COUNT (sizeof library_errors / sizeof library_errors[0])

int imagent_code_from_ipc(uint64_t ipc_code)
{
    if (ipc_code >= 1 && ipc_code < (uint64_t)IPC_ERROR_COUNT)
        return -(int)ipc_code;
    return IMAGENT_ERR_INTERNAL;
}

const char *imagent_error_name(int code)
{
    if (code <= 0 && code > -IPC_ERROR_COUNT)
        return ipc_errors[-code].name;
    for (size_t i = 0; i < LIBRARY_ERROR_COUNT; i++)
        if (library_errors[i].code == code)
            return library_errors[i].name;
    return "UNKNOWN_ERROR";
}

const char *imagent_strerror(int code)
{
    if (code <= 0 && code > -IPC_ERROR_COUNT)
        return ipc_errors[-code].text;
    for (size_t i = 0; i < LIBRARY_ERROR_COUNT; i++)
        if (library_errors[i].code == code)
            return library_errors[i].text;
    return "unknown error code";
}
