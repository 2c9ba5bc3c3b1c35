/*
 * client_internal.h - the parts of client.c that unit tests look at.
 */
#ifndef IMAGENT_CLIENT_INTERNAL_H
#define IMAGENT_CLIENT_INTERNAL_H

/* How long to wait before reconnect attempt `attempt` (1, 2, ...), in ms:
 *
 *   attempt   1    2    3    4    5    6    7+
 *   delay     0   50  100  200  400  800  1000 (the cap)
 *
 * The first attempt is at once: after a daemon restart the socket is usually
 * back within a second, and a capped doubling keeps a down daemon from being
 * hammered while bounding how late the library notices it is back. */
int imagent_reconnect_delay_ms(unsigned attempt);

/* Queue limits (see libimagent(3), BOUNDED MEMORY). While the queue holds
 * SOFT messages or bytes the library reads the socket only to find a reply it
 * waits for; messages read past HARD are dropped and fetched again later. */
#define IMAGENT_QUEUE_SOFT_MESSAGES 1024u
#define IMAGENT_QUEUE_SOFT_BYTES (16u * 1024 * 1024)
#define IMAGENT_QUEUE_HARD_MESSAGES (4 * IMAGENT_QUEUE_SOFT_MESSAGES)
#define IMAGENT_QUEUE_HARD_BYTES (4 * IMAGENT_QUEUE_SOFT_BYTES)

/* The largest MAX_PAYLOAD the library believes from WELCOME. */
#define IMAGENT_MAX_PAYLOAD_CAP (64u * 1024 * 1024)

#endif
