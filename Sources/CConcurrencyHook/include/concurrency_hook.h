#ifndef IMAGENT_CONCURRENCY_HOOK_H
#define IMAGENT_CONCURRENCY_HOOK_H

#include <stdbool.h>

/// Sends every job for Swift concurrency's global executor to `enqueue` (the
/// job, an `UnownedJob`'s pointer) instead of the runtime's default executor,
/// libdispatch's worker pool: sets the runtime's global enqueue hook
/// (`swift_task_enqueueGlobal_hook`). Returns false, changing nothing, when a
/// hook is installed already. Call before any task runs, once.
///
/// The runtime's variable is linked here by name rather than looked up with
/// dlsym: a runtime linked statically (`--static-swift-stdlib`, as the package
/// is built) does not export it, so dlsym finds nothing there.
bool imagent_route_global_jobs(void (*enqueue)(void *job));

#endif
