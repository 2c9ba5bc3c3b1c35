#include "concurrency_hook.h"

#include <stddef.h>

/// The runtime's hook: a Swift-convention function of the job and the
/// runtime's own enqueue function; NULL until set.
extern void *swift_task_enqueueGlobal_hook;

static void (*route)(void *job);

__attribute__((swiftcall)) static void enqueue_global(void *job, void *original) {
    (void)original;
    route(job);
}

bool imagent_route_global_jobs(void (*enqueue)(void *job)) {
    route = enqueue;
    void *none = NULL;
    return __atomic_compare_exchange_n(&swift_task_enqueueGlobal_hook, &none, (void *)enqueue_global, false,
                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
