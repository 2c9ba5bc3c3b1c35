/*
 * sessions.c - the session table and the decisions that resume a session
 * (see sessions.h).
 */
#include "sessions.h"

#include <stdlib.h>

session_state *session_find(session_table *table, uint64_t id)
{
    for (size_t i = 0; i < table->count; i++)
        if (table->items[i].id == id)
            return &table->items[i];
    return NULL;
}

session_state *session_track(session_table *table, uint64_t id)
{
    session_state *existing = session_find(table, id);
    if (existing)
        return existing;
    if (table->count == table->capacity) {
        size_t capacity = table->capacity ? table->capacity * 2 : 8;
        if (capacity > SIZE_MAX / sizeof *table->items)
            return NULL;
        session_state *grown = realloc(table->items, capacity * sizeof *grown);
        if (!grown)
            return NULL;
        table->items = grown;
        table->capacity = capacity;
    }
    session_state *added = &table->items[table->count++];
    *added = (session_state){.id = id};
    return added;
}

void session_forget(session_table *table, uint64_t id)
{
    session_state *found = session_find(table, id);
    if (found)
        *found = table->items[--table->count];
}

void session_table_free(session_table *table)
{
    free(table->items);
    *table = (session_table){0};
}

static void raise_to(uint64_t *value, uint64_t seen)
{
    if (seen > *value)
        *value = seen;
}

uint64_t session_attached(session_state *session, uint64_t sent_seq, uint64_t delivered_seq)
{
    /* SENT_SEQ counts every message that will ever be ACCEPTED, also one
     * whose ACCEPTED was lost with the connection. */
    raise_to(&session->accepted_seq, sent_seq);
    /* The daemon delivers again everything after DELIVERED_SEQ: what the
     * program has already is dropped by handed_seq. */
    raise_to(&session->handed_seq, delivered_seq);
    raise_to(&session->acked_seq, delivered_seq);
    session->overflowed = false;
    /* An ack lost with the old connection: say it again, or the daemon would
     * deliver those messages again after every attach. */
    return session->acked_seq > delivered_seq ? session->acked_seq : 0;
}

void session_accepted(session_state *session, uint64_t seq)
{
    if (session)
        raise_to(&session->accepted_seq, seq);
}

void session_acknowledged(session_state *session, uint64_t seq)
{
    if (session)
        raise_to(&session->acked_seq, seq);
}

message_verdict session_on_message(session_state *session, uint64_t seq, bool queue_has_room)
{
    if (!session)
        return MESSAGE_QUEUE;
    if (seq <= session->handed_seq)
        return MESSAGE_ALREADY_HANDED;
    if (session->overflowed)
        return MESSAGE_HELD_BACK;
    if (!queue_has_room) {
        session->overflowed = true;
        return MESSAGE_OVERFLOW;
    }
    return MESSAGE_QUEUE;
}

void session_handed(session_state *session, uint64_t seq)
{
    if (session)
        raise_to(&session->handed_seq, seq);
}

bool session_send_was_stored(const session_state *session, uint64_t accepted_before)
{
    return session->accepted_seq > accepted_before;
}
