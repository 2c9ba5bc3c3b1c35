/*
 * sessions.h - the sessions a handle has attached, and what it remembers of
 * each to survive the daemon: how far its sends were stored, how far the
 * program has its messages, how far the program acknowledged them.
 *
 * The decisions about resuming are functions of that state and of what the
 * daemon said (OPENED's SENT_SEQ and DELIVERED_SEQ, a MESSAGE's seq, an
 * ACCEPTED's seq). They do no I/O and send nothing: the caller does what they
 * return. tests/test_sessions.c drives them alone.
 */
#ifndef IMAGENT_SESSIONS_H
#define IMAGENT_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct session_state {
    uint64_t id;
    uint64_t accepted_seq; /* highest outbound seq seen ACCEPTED, or OPENED's SENT_SEQ */
    uint64_t handed_seq;   /* highest inbound seq queued for the program */
    uint64_t acked_seq;    /* highest inbound seq the program acknowledged */
    bool overflowed;       /* a message was dropped for room: later ones are too, until re-attached */
} session_state;

typedef struct session_table {
    session_state *items;
    size_t count;
    size_t capacity;
} session_table;

/* NULL when the session is not tracked. */
session_state *session_find(session_table *table, uint64_t id);
/* The session's entry, added with every seq 0 if it is new; NULL when out of
 * memory. */
session_state *session_track(session_table *table, uint64_t id);
/* The entry pointers of other sessions may move. */
void session_forget(session_table *table, uint64_t id);
void session_table_free(session_table *table);

/* OPENED said where the session stands after an attach. Takes SENT_SEQ and
 * DELIVERED_SEQ in and clears an overflow (the daemon delivers again from
 * DELIVERED_SEQ). Returns the seq to acknowledge again, or 0: an ack the
 * daemon lost with the old connection. */
uint64_t session_attached(session_state *session, uint64_t sent_seq, uint64_t delivered_seq);

/* An ACCEPTED for seq, also a late one. `session` may be NULL (untracked). */
void session_accepted(session_state *session, uint64_t seq);
/* The program acknowledged up to seq. `session` may be NULL. */
void session_acknowledged(session_state *session, uint64_t seq);

typedef enum message_verdict {
    MESSAGE_QUEUE,          /* new: queue it, then session_handed() */
    MESSAGE_ALREADY_HANDED, /* redelivered after a re-attach: the program has it */
    MESSAGE_HELD_BACK,      /* after an overflow: queueing it would break the order */
    MESSAGE_OVERFLOW        /* no room: dropped; the session now holds back the rest */
} message_verdict;

/* What to do with MESSAGE seq of `session` (NULL: untracked, always queued)
 * given whether the queue has room below its hard limit. MESSAGE_OVERFLOW
 * marks the session overflowed. */
message_verdict session_on_message(session_state *session, uint64_t seq, bool queue_has_room);
/* MESSAGE seq is queued for the program. `session` may be NULL. */
void session_handed(session_state *session, uint64_t seq);

/* A SEND was lost with its connection when the session's accepted seq was
 * accepted_before; after re-attaching (session_attached()), whether SENT_SEQ
 * shows the daemon stored it. It did if SENT_SEQ moved: exact while this
 * handle is the session's only sender. */
bool session_send_was_stored(const session_state *session, uint64_t accepted_before);

#endif
