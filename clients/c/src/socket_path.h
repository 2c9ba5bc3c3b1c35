/*
 * socket_path.h - finding the daemon's socket and connecting to it.
 */
#ifndef IMAGENT_SOCKET_PATH_H
#define IMAGENT_SOCKET_PATH_H

#define IMAGENT_SYSTEM_SOCKET "/run/imagent/imagent.sock"

/* The socket to use (imagent-ipc(7), THE SOCKET): explicit_path if not NULL,
 * else $IMAGENT_SOCKET if non-empty, else the system socket if it exists, else
 * $XDG_RUNTIME_DIR/imagent/imagent.sock if it exists, else the system socket.
 * *path is malloc'd. Returns 0 or a negative imagent code. */
int imagent_resolve_socket_path(const char *explicit_path, char **path);

/* Connects a non-blocking, close-on-exec stream socket to PATH.admin, or to
 * PATH when the admin socket refuses us (no permission, no such file, refused,
 * queue full). Returns 0 with *fd set, or IMAGENT_ERR_UNAVAILABLE,
 * IMAGENT_ERR_PERMISSION_DENIED, IMAGENT_ERR_INVALID_ARGUMENT (path too long)
 * or IMAGENT_ERR_SYSTEM. */
int imagent_socket_connect(const char *path, int *fd);

#endif
