/*
 * deadline.h - time as the blocking calls count it. A call turns its timeout
 * into a deadline on the monotonic clock once, and every wait inside the call
 * (poll, a reconnect's backoff) gets what is left of it, so a call that
 * reconnects, writes and reads several times still returns on time.
 */
#ifndef IMAGENT_DEADLINE_H
#define IMAGENT_DEADLINE_H

#include <stdint.h>

/* The deadline of a call that waits for ever. */
#define DEADLINE_NEVER INT64_MAX

/* Milliseconds on CLOCK_MONOTONIC: immune to changes of the wall clock. */
int64_t monotonic_ms(void);
/* Now plus timeout_ms, or DEADLINE_NEVER for a negative timeout. */
int64_t deadline_after(int timeout_ms);
/* What poll() waits until deadline: -1 for ever, else 0 .. INT_MAX. */
int deadline_poll_timeout(int64_t deadline);
/* Sleeps until the monotonic time `when`, through signals. */
void sleep_until(int64_t when);

#endif
