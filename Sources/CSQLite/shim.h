#include <sqlite3.h>

/// Turns off SQLite's memory statistics, which take a global mutex on every allocation.
/// Nothing here reads them (no sqlite3_memory_used, no soft heap limit). It must run before
/// SQLite initializes; later it returns SQLITE_MISUSE and changes nothing. A wrapper because
/// sqlite3_config is variadic, which Swift does not import.
static inline int imagent_sqlite3_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
