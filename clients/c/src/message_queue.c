/*
 * message_queue.c - the received messages waiting for imagent_receive().
 */
#include "message_queue.h"

#include <stdlib.h>
#include <string.h>

#include "imagent.h"

int message_queue_push(message_queue *queue, uint64_t session, uint64_t seq, const uint8_t *payload,
                       size_t length)
{
    if (length > SIZE_MAX - sizeof(queued_message))
        return IMAGENT_ERR_NO_MEMORY;
    queued_message *node = malloc(sizeof *node + length);
    if (!node)
        return IMAGENT_ERR_NO_MEMORY;
    node->next = NULL;
    node->session = session;
    node->seq = seq;
    node->length = length;
    if (length)
        memcpy(node->payload, payload, length);
    if (queue->tail)
        queue->tail->next = node;
    else
        queue->head = node;
    queue->tail = node;
    queue->count++;
    queue->bytes += length;
    return 0;
}

queued_message *message_queue_pop(message_queue *queue)
{
    queued_message *node = queue->head;
    if (!node)
        return NULL;
    queue->head = node->next;
    if (!queue->head)
        queue->tail = NULL;
    queue->count--;
    queue->bytes -= node->length;
    node->next = NULL;
    return node;
}

void message_queue_clear(message_queue *queue)
{
    queued_message *node;
    while ((node = message_queue_pop(queue)))
        free(node);
}
