/*
 * incoming.h - what the daemon sends: the reply a call waits for, late
 * replies, events (to the callback) and messages (to the queue).
 */
#ifndef IMAGENT_INCOMING_H
#define IMAGENT_INCOMING_H

#include "client_state.h"

typedef enum read_goal {
    READ_FOR_REPLY,   /* until the awaited reply is in, whatever the queue holds */
    READ_FOR_MESSAGES /* while the queue is below its soft limit */
} read_goal;

/* Reads what the socket has without blocking and routes every frame, until
 * the goal is met or nothing more is there. Returns 0, CONNECTION_LOST, or
 * another negative code; after any negative code the connection is dropped
 * (it cannot be trusted after a malformed frame). */
int incoming_read(imagent_client *client, read_goal goal);

/* Calls the program's callback, if any. */
void emit_event(imagent_client *client, const imagent_event *event);

#endif
