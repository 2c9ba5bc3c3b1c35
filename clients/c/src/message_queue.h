/*
 * message_queue.h - the received messages waiting for imagent_receive().
 *
 * Each message is one allocation (node and payload together) that is handed
 * to the program as is and freed by imagent_message_release(), so a message
 * the program still holds outlives the queue and the client.
 */
#ifndef IMAGENT_MESSAGE_QUEUE_H
#define IMAGENT_MESSAGE_QUEUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct queued_message {
    struct queued_message *next;
    uint64_t session;
    uint64_t seq;
    size_t length;
    uint8_t payload[];
} queued_message;

typedef struct message_queue {
    queued_message *head;
    queued_message *tail;
    size_t count;
    size_t bytes; /* payload bytes */
} message_queue;

/* Copies the payload into a new node at the tail; 0 or IMAGENT_ERR_NO_MEMORY. */
int message_queue_push(message_queue *queue, uint64_t session, uint64_t seq, const uint8_t *payload,
                       size_t length);
/* The head, unlinked (the caller owns it), or NULL. */
queued_message *message_queue_pop(message_queue *queue);
void message_queue_clear(message_queue *queue);

#endif
