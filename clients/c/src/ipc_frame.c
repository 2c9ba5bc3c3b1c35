/*
 * ipc_frame.c - the Agent IPC/1 frame codec (see ipc_frame.h for the layout).
 */
#include "ipc_frame.h"

#include <stdlib.h>
#include <string.h>

/* The known tags, their slot (the index in this table) and the size their
 * value must have (0: any size, for text and bytes). */
static const struct {
    uint16_t tag;
    uint8_t size;
} known_tags[IPC_KNOWN_TAG_COUNT] = {
    {IPC_TAG_IPC_VERSION, 1}, {IPC_TAG_CLIENT_NAME, 0},   {IPC_TAG_DAEMON_VERSION, 0}, {IPC_TAG_MAX_PAYLOAD, 4},
    {IPC_TAG_LINK_STATE, 1},  {IPC_TAG_SESSION, 8},       {IPC_TAG_SERVICE, 0},        {IPC_TAG_PRIORITY, 1},
    {IPC_TAG_DURABLE, 1},     {IPC_TAG_SESSION_STATE, 1}, {IPC_TAG_SEQ, 8},            {IPC_TAG_SENT_SEQ, 8},
    {IPC_TAG_ACKED_SEQ, 8},   {IPC_TAG_DELIVERED_SEQ, 8}, {IPC_TAG_TTL_MS, 4},         {IPC_TAG_PAYLOAD, 0},
    {IPC_TAG_CODE, 2},        {IPC_TAG_MESSAGE, 0},       {IPC_TAG_JSON, 0},
};

static int slot_of(uint16_t tag)
{
    for (int slot = 0; slot < IPC_KNOWN_TAG_COUNT; slot++)
        if (known_tags[slot].tag == tag)
            return slot;
    return -1;
}

static uint64_t read_be(const uint8_t *bytes, size_t size)
{
    uint64_t value = 0;
    for (size_t i = 0; i < size; i++)
        value = value << 8 | bytes[i];
    return value;
}

int ipc_frame_size(const uint8_t *data, size_t available, uint32_t max_length, size_t *frame_size)
{
    if (available < IPC_LENGTH_FIELD_SIZE)
        return IPC_NEED_MORE;
    uint32_t length = (uint32_t)read_be(data, 4);
    if (length < IPC_MIN_LENGTH)
        return IPC_ERR_LENGTH_TOO_SHORT;
    if (length > max_length)
        return IPC_ERR_LENGTH_TOO_LONG;
#if SIZE_MAX <= UINT32_MAX
    /* A 32-bit size_t: 4 + length must not wrap to a small frame. */
    if (length > SIZE_MAX - IPC_LENGTH_FIELD_SIZE)
        return IPC_ERR_LENGTH_TOO_LONG;
#endif
    *frame_size = (size_t)IPC_LENGTH_FIELD_SIZE + length;
    return IPC_DECODED;
}

int ipc_frame_decode(const uint8_t *data, size_t available, uint32_t max_length, ipc_frame *frame,
                     size_t *consumed)
{
    size_t frame_size = 0;
    int sized = ipc_frame_size(data, available, max_length, &frame_size);
    if (sized != IPC_DECODED)
        return sized;
    if (available < frame_size)
        return IPC_NEED_MORE;

    memset(frame, 0, sizeof *frame);
    frame->op = (uint16_t)read_be(data + 4, 2);
    frame->request = (uint32_t)read_be(data + 6, 4);

    size_t offset = IPC_HEADER_SIZE;
    while (offset < frame_size) {
        /* Compare against what is left rather than adding to offset, so a
         * huge len cannot wrap around. */
        if (frame_size - offset < IPC_RECORD_HEADER_SIZE)
            return IPC_ERR_RECORD_OVERRUN;
        uint16_t tag = (uint16_t)read_be(data + offset, 2);
        uint32_t length = (uint32_t)read_be(data + offset + 2, 4);
        offset += IPC_RECORD_HEADER_SIZE;
        if (length > frame_size - offset)
            return IPC_ERR_RECORD_OVERRUN;
        int slot = slot_of(tag);
        if (slot >= 0) {
            if (known_tags[slot].size != 0 && length != known_tags[slot].size)
                return IPC_ERR_RECORD_SIZE;
            if (frame->present & (1u << slot))
                return IPC_ERR_DUPLICATE_RECORD;
            frame->present |= 1u << slot;
            frame->value[slot].data = data + offset;
            frame->value[slot].length = length;
        }
        offset += length;
    }
    *consumed = frame_size;
    return IPC_DECODED;
}

bool ipc_frame_has(const ipc_frame *frame, uint16_t tag)
{
    int slot = slot_of(tag);
    return slot >= 0 && (frame->present & (1u << slot));
}

uint64_t ipc_frame_uint(const ipc_frame *frame, uint16_t tag)
{
    int slot = slot_of(tag);
    if (slot < 0 || !(frame->present & (1u << slot)))
        return 0;
    return read_be(frame->value[slot].data, frame->value[slot].length);
}

ipc_bytes ipc_frame_bytes(const ipc_frame *frame, uint16_t tag)
{
    int slot = slot_of(tag);
    if (slot < 0 || !(frame->present & (1u << slot)))
        return (ipc_bytes){NULL, 0};
    return frame->value[slot];
}

void ipc_buffer_free(ipc_buffer *buffer)
{
    free(buffer->data);
    memset(buffer, 0, sizeof *buffer);
}

bool ipc_buffer_reserve(ipc_buffer *buffer, size_t extra)
{
    if (buffer->failed)
        return false;
    if (extra <= buffer->capacity - buffer->length)
        return true;
    if (extra > SIZE_MAX / 2 - buffer->length) {
        buffer->failed = true;
        return false;
    }
    size_t capacity = buffer->capacity ? buffer->capacity : 256;
    while (capacity - buffer->length < extra)
        capacity *= 2;
    uint8_t *data = realloc(buffer->data, capacity);
    if (!data) {
        buffer->failed = true;
        return false;
    }
    buffer->data = data;
    buffer->capacity = capacity;
    return true;
}

void ipc_buffer_consume(ipc_buffer *buffer, size_t count)
{
    if (count >= buffer->length) {
        buffer->length = 0;
        return;
    }
    memmove(buffer->data, buffer->data + count, buffer->length - count);
    buffer->length -= count;
}

static void put_be(ipc_buffer *buffer, uint64_t value, size_t size)
{
    if (!ipc_buffer_reserve(buffer, size))
        return;
    for (size_t i = 0; i < size; i++)
        buffer->data[buffer->length + i] = (uint8_t)(value >> (8 * (size - 1 - i)));
    buffer->length += size;
}

void ipc_frame_begin(ipc_buffer *buffer, uint16_t op, uint32_t request)
{
    buffer->frame_start = buffer->length;
    put_be(buffer, 0, 4); /* the length, written by ipc_frame_end() */
    put_be(buffer, op, 2);
    put_be(buffer, request, 4);
}

static void put_record_header(ipc_buffer *buffer, uint16_t tag, size_t length)
{
    put_be(buffer, tag, 2);
    put_be(buffer, length, 4);
}

/* An integer record: its size is the value's width. */
static void put_uint_record(ipc_buffer *buffer, uint16_t tag, uint64_t value, size_t size)
{
    put_record_header(buffer, tag, size);
    put_be(buffer, value, size);
}

void ipc_put_u8(ipc_buffer *buffer, uint16_t tag, uint8_t value) { put_uint_record(buffer, tag, value, 1); }
void ipc_put_u16(ipc_buffer *buffer, uint16_t tag, uint16_t value) { put_uint_record(buffer, tag, value, 2); }
void ipc_put_u32(ipc_buffer *buffer, uint16_t tag, uint32_t value) { put_uint_record(buffer, tag, value, 4); }
void ipc_put_u64(ipc_buffer *buffer, uint16_t tag, uint64_t value) { put_uint_record(buffer, tag, value, 8); }

void ipc_put_bytes(ipc_buffer *buffer, uint16_t tag, const void *value, size_t length)
{
    if (length > UINT32_MAX) {
        buffer->failed = true;
        return;
    }
    put_record_header(buffer, tag, length);
    if (length == 0 || !ipc_buffer_reserve(buffer, length))
        return;
    memcpy(buffer->data + buffer->length, value, length);
    buffer->length += length;
}

bool ipc_frame_end(ipc_buffer *buffer)
{
    size_t length = buffer->length - buffer->frame_start - IPC_LENGTH_FIELD_SIZE;
    if (buffer->failed || length > UINT32_MAX) {
        /* Drop the partial frame; the frames before it stay intact. */
        if (buffer->frame_start <= buffer->length)
            buffer->length = buffer->frame_start;
        buffer->failed = false;
        return false;
    }
    uint8_t *field = buffer->data + buffer->frame_start;
    for (int i = 0; i < 4; i++)
        field[i] = (uint8_t)(length >> (8 * (3 - i)));
    return true;
}

size_t ipc_utf8_prefix_length(const char *text, size_t length, size_t limit)
{
    if (length <= limit)
        return length;
    size_t cut = limit;
    /* Back up over continuation bytes (10xxxxxx) so the cut falls before the
     * lead byte of the sequence it would split. */
    while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80)
        cut--;
    return cut;
}

bool ipc_utf8_valid(const char *text, size_t length)
{
    const unsigned char *bytes = (const unsigned char *)text;
    size_t i = 0;
    while (i < length) {
        unsigned char lead = bytes[i];
        size_t extra;
        uint32_t point;
        if (lead < 0x80) {
            i++;
            continue;
        } else if (lead >= 0xC2 && lead <= 0xDF) {
            extra = 1, point = lead & 0x1F;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            extra = 2, point = lead & 0x0F;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            extra = 3, point = lead & 0x07;
        } else {
            return false; /* a continuation byte, or an overlong two-byte lead */
        }
        if (length - i <= extra)
            return false;
        for (size_t k = 1; k <= extra; k++) {
            if ((bytes[i + k] & 0xC0) != 0x80)
                return false;
            point = point << 6 | (bytes[i + k] & 0x3F);
        }
        /* Overlong forms, UTF-16 surrogates, beyond U+10FFFF. */
        if ((extra == 2 && point < 0x800) || (extra == 3 && point < 0x10000) || point > 0x10FFFF ||
            (point >= 0xD800 && point <= 0xDFFF))
            return false;
        i += extra + 1;
    }
    return true;
}
