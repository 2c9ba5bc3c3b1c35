/*
 * reconnect.h - the client's connection over time: making one (HELLO, then
 * attaching again every tracked session, which resolves a send in flight and
 * repeats a lost ack), losing one (IMAGENT_EVENT_DISCONNECTED), and making the
 * next with backoff.
 */
#ifndef IMAGENT_RECONNECT_H
#define IMAGENT_RECONNECT_H

#include <stdint.h>

#include "client_state.h"

/* One attempt: connect, HELLO, re-attach. 0, or a negative code with the
 * handle disconnected. */
int connect_once(imagent_client *client, int64_t deadline);
/* Connects again if the connection is gone, backing off between attempts,
 * until deadline. IMAGENT_ERR_UNAVAILABLE when the deadline passes first. */
int ensure_connected(imagent_client *client, int64_t deadline);
/* Closes the connection: the awaited reply and the unwritten frames go with
 * it. Requests are repeated by their callers, acks after re-attaching. */
void drop_connection(imagent_client *client);
/* connection_flush(), dropping the connection when it is lost. */
int flush_output(imagent_client *client);

/* Takes in the OPENED in client->reply for session expected_id (0: any, a new
 * session): the session is tracked from now on, and an ack the daemon lost is
 * queued again. */
int track_opened(imagent_client *client, uint64_t expected_id);

#endif
