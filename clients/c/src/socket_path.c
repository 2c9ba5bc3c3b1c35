/*
 * socket_path.c - finding the daemon's socket and connecting to it.
 */
#include "socket_path.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "imagent.h"

static int copy_path(const char *text, char **path)
{
    *path = strdup(text);
    return *path ? 0 : IMAGENT_ERR_NO_MEMORY;
}

static int exists(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0;
}

int imagent_resolve_socket_path(const char *explicit_path, char **path)
{
    if (explicit_path)
        return explicit_path[0] ? copy_path(explicit_path, path) : IMAGENT_ERR_INVALID_ARGUMENT;
    const char *from_environment = getenv("IMAGENT_SOCKET");
    if (from_environment && from_environment[0])
        return copy_path(from_environment, path);
    if (exists(IMAGENT_SYSTEM_SOCKET))
        return copy_path(IMAGENT_SYSTEM_SOCKET, path);
    const char *runtime_dir = getenv("XDG_RUNTIME_DIR");
    if (runtime_dir && runtime_dir[0]) {
        size_t size = strlen(runtime_dir) + sizeof "/imagent/imagent.sock";
        char *user_path = malloc(size);
        if (!user_path)
            return IMAGENT_ERR_NO_MEMORY;
        snprintf(user_path, size, "%s/imagent/imagent.sock", runtime_dir);
        if (exists(user_path)) {
            *path = user_path;
            return 0;
        }
        free(user_path);
    }
    /* Nothing exists: name the system socket, so the error says where the
     * daemon was expected. */
    return copy_path(IMAGENT_SYSTEM_SOCKET, path);
}

/* Connects to one path; returns the fd, or -1 with errno set. */
static int connect_one(const char *path)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(address.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int result = connect(fd, (const struct sockaddr *)&address, sizeof address);
    /* A connect() cut short by a signal goes on in the kernel: asking again
     * may find it done (EISCONN). */
    bool interrupted = false;
    while (result < 0 && errno == EINTR) {
        interrupted = true;
        result = connect(fd, (const struct sockaddr *)&address, sizeof address);
    }
    if (result < 0 && interrupted && errno == EISCONN)
        result = 0;
    if (result < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static int admin_refuses_us(int error)
{
    /* ENAMETOOLONG: the ".admin" suffix pushed the path past sun_path. */
    return error == EACCES || error == EPERM || error == ENOENT || error == ECONNREFUSED || error == EAGAIN ||
           error == ENAMETOOLONG;
}

int imagent_socket_connect(const char *path, int *fd)
{
    size_t size = strlen(path) + sizeof ".admin";
    char *admin_path = malloc(size);
    if (!admin_path)
        return IMAGENT_ERR_NO_MEMORY;
    snprintf(admin_path, size, "%s.admin", path);
    int connected = connect_one(admin_path);
    int admin_error = errno;
    free(admin_path);
    if (connected < 0 && admin_refuses_us(admin_error))
        connected = connect_one(path);
    if (connected >= 0) {
        *fd = connected;
        return 0;
    }
    switch (errno) {
    case EACCES:
    case EPERM:
        return IMAGENT_ERR_PERMISSION_DENIED;
    case ENAMETOOLONG:
        return IMAGENT_ERR_INVALID_ARGUMENT;
    case ENOENT:
    case ECONNREFUSED:
    case EAGAIN:
    case ENOTDIR:
        return IMAGENT_ERR_UNAVAILABLE;
    default:
        return IMAGENT_ERR_SYSTEM;
    }
}
