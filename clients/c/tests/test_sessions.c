/*
 * test_sessions.c - the resume decisions of sessions.c, driven by what the
 * daemon says, without a daemon: redelivered messages dropped, an overflow
 * holding back the rest until the re-attach, a lost ack repeated, a send in
 * flight resolved from SENT_SEQ.
 */
#include "sessions.h"
#include "test.h"

static void tracks_and_forgets_sessions(void)
{
    session_table table = {0};
    for (uint64_t id = 1; id <= 20; id++)
        CHECK(session_track(&table, id) != NULL);
    CHECK(table.count == 20);
    CHECK(session_track(&table, 7) == session_find(&table, 7)); /* tracked once */
    CHECK(table.count == 20);
    session_forget(&table, 7);
    session_forget(&table, 99); /* not tracked: nothing happens */
    CHECK(table.count == 19 && session_find(&table, 7) == NULL && session_find(&table, 20) != NULL);
    session_table_free(&table);
    CHECK(table.items == NULL && table.count == 0);
}

static void drops_messages_the_program_has_already(void)
{
    session_state session = {.id = 1}; /* as session_track() adds it */
    CHECK(session_attached(&session, 0, 0) == 0);
    CHECK(session_on_message(&session, 1, true) == MESSAGE_QUEUE);
    session_handed(&session, 1);
    CHECK(session_on_message(&session, 2, true) == MESSAGE_QUEUE);
    session_handed(&session, 2);
    /* The daemon restarts; nothing was acked: it delivers 1 and 2 again. */
    CHECK(session_attached(&session, 0, 0) == 0);
    CHECK(session_on_message(&session, 1, true) == MESSAGE_ALREADY_HANDED);
    CHECK(session_on_message(&session, 2, true) == MESSAGE_ALREADY_HANDED);
    CHECK(session_on_message(&session, 3, true) == MESSAGE_QUEUE);
    /* Untracked sessions have nothing to compare with. */
    CHECK(session_on_message(NULL, 1, false) == MESSAGE_QUEUE);
}

static void holds_back_the_rest_after_an_overflow_until_reattached(void)
{
    session_state session = {.id = 1};
    session_attached(&session, 0, 0);
    session_handed(&session, 1);
    CHECK(session_on_message(&session, 2, false) == MESSAGE_OVERFLOW);
    CHECK(session.overflowed);
    CHECK(session_on_message(&session, 3, true) == MESSAGE_HELD_BACK); /* or 3 would overtake 2 */
    CHECK(session_attached(&session, 0, 1) == 0);
    CHECK(!session.overflowed);
    CHECK(session_on_message(&session, 2, true) == MESSAGE_QUEUE);
}

static void repeats_an_ack_the_daemon_lost(void)
{
    session_state session = {.id = 1};
    session_attached(&session, 0, 0);
    session_handed(&session, 5);
    session_acknowledged(&session, 5);
    session_acknowledged(&session, 3); /* acks are cumulative: an older one changes nothing */
    CHECK(session.acked_seq == 5);
    CHECK(session_attached(&session, 0, 2) == 5); /* the daemon has 2: say 5 again */
    CHECK(session_attached(&session, 0, 5) == 0); /* it has 5 */
    CHECK(session_attached(&session, 0, 8) == 0 && session.acked_seq == 8 && session.handed_seq == 8);
}

static void resolves_a_send_in_flight_from_sent_seq(void)
{
    session_state session = {.id = 1};
    session_attached(&session, 4, 0);
    uint64_t before = session.accepted_seq;
    CHECK(before == 4);
    session_attached(&session, 4, 0); /* not stored */
    CHECK(!session_send_was_stored(&session, before));
    session_attached(&session, 5, 0); /* stored: its seq is 5 */
    CHECK(session_send_was_stored(&session, before));
    session_accepted(&session, 3); /* a late ACCEPTED never lowers it */
    session_accepted(NULL, 9); /* nor does one of an untracked session matter */
    CHECK(session.accepted_seq == 5);
}

void run_session_tests(void)
{
    RUN(tracks_and_forgets_sessions);
    RUN(drops_messages_the_program_has_already);
    RUN(holds_back_the_rest_after_an_overflow_until_reattached);
    RUN(repeats_an_ack_the_daemon_lost);
    RUN(resolves_a_send_in_flight_from_sent_seq);
}
