#define _GNU_SOURCE
#include "child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

struct spawn_request {
    const char *path;
    char *const *argv;
    char *const *envp;
    int fds[3];
    const char *directory;
    int death_signal;
    pid_t pid;
    int error;
    int done;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static pthread_once_t started = PTHREAD_ONCE_INIT;
static struct spawn_request *pending;

/// Only async-signal-safe calls between fork and exec: the parent has other threads.
static void run_child(struct spawn_request *request, pid_t parent, int report) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int signal = 1; signal < NSIG; signal++) {
        struct sigaction action = {0};
        action.sa_handler = SIG_DFL;
        sigaction(signal, &action, NULL);
    }
    if (request->death_signal != 0) {
        prctl(PR_SET_PDEATHSIG, request->death_signal);
        if (getppid() != parent) _exit(127); // the parent died before prctl
    }
    for (int target = 0; target < 3; target++) {
        int source = request->fds[target];
        if (source < 0) continue;
        if (source == target) {
            fcntl(target, F_SETFD, 0);
        } else if (dup2(source, target) < 0) {
            goto failed;
        }
    }
    // Every other descriptor closes at exec (the report pipe already does).
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
        long limit = sysconf(_SC_OPEN_MAX);
        if (limit < 0 || limit > 65536) limit = 65536;
        for (int fd = 3; fd < limit; fd++) if (fd != report) fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    if (request->directory != NULL && chdir(request->directory) != 0) goto failed;
    execve(request->path, request->argv, request->envp);
failed:;
    int error = errno;
    ssize_t ignored = write(report, &error, sizeof error);
    (void)ignored;
    _exit(127);
}

static void spawn_now(struct spawn_request *request) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        request->error = errno;
        return;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        request->error = errno;
        close(report[0]);
        close(report[1]);
        return;
    }
    if (pid == 0) run_child(request, parent, report[1]);
    close(report[1]);
    int error = 0;
    ssize_t count;
    do {
        count = read(report[0], &error, sizeof error);
    } while (count < 0 && errno == EINTR);
    close(report[0]);
    if (count == (ssize_t)sizeof error) {
        // exec failed: the child is gone; reap it so it does not linger as a zombie.
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        request->error = error;
        return;
    }
    request->pid = pid;
    request->error = 0;
}

static void *spawner(void *unused) {
    (void)unused;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (pending == NULL) pthread_cond_wait(&changed, &lock);
        struct spawn_request *request = pending;
        pending = NULL;
        pthread_mutex_unlock(&lock);
        spawn_now(request);
        pthread_mutex_lock(&lock);
        request->done = 1;
        pthread_cond_broadcast(&changed);
    }
    return NULL;
}

static void start_spawner(void) {
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    // The spawner blocks every signal: they belong to the process's own handlers.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pthread_create(&thread, &attributes, spawner, NULL);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    pthread_attr_destroy(&attributes);
}

int imagent_child_spawn(const char *path, char *const argv[], char *const envp[],
                        int stdin_fd, int stdout_fd, int stderr_fd,
                        const char *directory, int death_signal, pid_t *pid) {
    struct spawn_request request = {
        .path = path, .argv = argv, .envp = envp,
        .fds = {stdin_fd, stdout_fd, stderr_fd},
        .directory = directory, .death_signal = death_signal,
    };
    pthread_once(&started, start_spawner);
    pthread_mutex_lock(&lock);
    while (pending != NULL) pthread_cond_wait(&changed, &lock);
    pending = &request;
    pthread_cond_broadcast(&changed);
    while (!request.done) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    if (request.error == 0) *pid = request.pid;
    return request.error;
}

int imagent_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}
