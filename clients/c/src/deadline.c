/*
 * deadline.c - the monotonic clock, deadlines and the waits they bound.
 */
#include "deadline.h"

#include <errno.h>
#include <limits.h>
#include <time.h>

int64_t monotonic_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

int64_t deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? DEADLINE_NEVER : monotonic_ms() + timeout_ms;
}

int deadline_poll_timeout(int64_t deadline)
{
    if (deadline == DEADLINE_NEVER)
        return -1;
    int64_t left = deadline - monotonic_ms();
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

void sleep_until(int64_t when)
{
    int64_t left = when - monotonic_ms();
    if (left <= 0)
        return;
    struct timespec pause = {.tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000};
    /* nanosleep() leaves the time still to sleep in `pause` when a signal
     * interrupts it. */
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR) {
    }
}
