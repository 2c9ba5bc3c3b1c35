#ifndef IMAGENT_CHILD_PROCESS_H
#define IMAGENT_CHILD_PROCESS_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` (both NULL-terminated, prepared by
/// the caller) and returns 0 with the child's pid in `*pid`, or an errno.
///
/// The child gets `stdin_fd`, `stdout_fd` and `stderr_fd` as its descriptors
/// 0, 1 and 2 (-1 keeps the parent's), no other descriptor of the parent, no
/// blocked or ignored signal, `directory` as its working directory when not
/// NULL, and `death_signal` (0 for none) when the parent process dies.
///
/// Unlike Foundation's Process, it never lists /proc/self/fd (which overruns
/// a buffer in this toolchain when the parent holds thousands of descriptors).
/// The fork happens on one long-lived thread of this library: Linux sends the
/// death signal when the *thread* that forked ends, and a pool thread may end
/// at any time.
int imagent_child_spawn(const char *path, char *const argv[], char *const envp[],
                        int stdin_fd, int stdout_fd, int stderr_fd,
                        const char *directory, int death_signal, pid_t *pid);

/// pipe2(fds, O_CLOEXEC), which Swift's Glibc module does not export.
int imagent_pipe_cloexec(int fds[2]);

#endif
