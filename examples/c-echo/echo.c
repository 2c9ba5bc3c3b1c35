/*
 * echo.c - libimagent in one page: open a session to the reference server's
 * "echo" service, send a line, receive the echo, acknowledge it, print it.
 *
 *   cc echo.c $(pkg-config --cflags --libs imagent) -o c-echo
 *   ./c-echo "hello there"
 *
 * The socket comes from $IMAGENT_SOCKET, else the system's (imagent_connect(3)).
 */
#include <imagent.h>
#include <stdio.h>
#include <string.h>

/* Link and session changes, as they come. */
static void show_event(const imagent_event *event, void *user_data)
{
    (void)user_data;
    if (event->type == IMAGENT_EVENT_DISCONNECTED)
        fprintf(stderr, "lost imagentd; reconnecting\n");
    else if (event->type == IMAGENT_EVENT_RECONNECTED)
        fprintf(stderr, "reconnected to imagentd\n");
}

static int fail(const char *what, int code)
{
    fprintf(stderr, "c-echo: %s: %s\n", what, imagent_strerror(code));
    return 1;
}

int main(int argc, char **argv)
{
    const char *line = argc > 1 ? argv[1] : "hello from C";

    imagent_client *client;
    int rc = imagent_connect(&client, NULL, "c-echo");
    if (rc < 0)
        return fail("connect", rc);
    imagent_set_event_callback(client, show_event, NULL);
    printf("connected to imagentd %s (libimagent %s)\n", imagent_daemon_version(client), IMAGENT_VERSION);

    uint64_t session, seq;
    if ((rc = imagent_open(client, "echo", &session)) < 0)
        return imagent_free(client), fail("open", rc);
    /* Returns once imagentd has stored the message: it will reach the
     * server even if imagentd restarts now. */
    if ((rc = imagent_send(client, session, line, strlen(line), &seq)) < 0)
        return imagent_free(client), fail("send", rc);
    printf("session %llu: sent #%llu: %s\n", (unsigned long long)session, (unsigned long long)seq, line);

    imagent_message message;
    if ((rc = imagent_receive(client, &message, 10000)) < 0)
        return imagent_free(client), fail("receive", rc);
    printf("echo #%llu: %.*s\n", (unsigned long long)message.seq, (int)message.length,
           (const char *)message.payload);
    /* Acknowledged messages are never delivered again. */
    imagent_ack(client, message.session, message.seq);
    imagent_message_release(&message);

    /* Ends the session for good; imagent_free() alone would only detach it. */
    if ((rc = imagent_close(client, session)) < 0)
        return imagent_free(client), fail("close", rc);
    imagent_free(client);
    return 0;
}
