/*
 * ipc_frame.h - the Agent IPC/1 frame codec: bytes to frames and back.
 *
 *  0               4       6               10
 * +---------------+-------+---------------+-------------------------+
 * |  length: u32  | op:16 | request: u32  | records ...             |
 * +---------------+-------+---------------+-------------------------+
 *                 <-------------- length bytes (at least 6) -------->
 *
 * Each record: tag u16, len u32, then len bytes. Integers are big-endian.
 * The decoder knows the tags of imagent-ipc(7) and checks their sizes; it
 * skips tags it does not know (that is how the protocol grows). It never
 * allocates: a decoded frame's values point into the caller's bytes.
 */
#ifndef IMAGENT_IPC_FRAME_H
#define IMAGENT_IPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IPC_LENGTH_FIELD_SIZE 4
#define IPC_HEADER_SIZE 10 /* length, op, request */
#define IPC_MIN_LENGTH 6   /* op and request */
#define IPC_RECORD_HEADER_SIZE 6
#define IPC_FRAME_OVERHEAD 65536u /* a frame may exceed MAX_PAYLOAD by this much */

enum ipc_op {
    IPC_OP_HELLO = 0x0001,
    IPC_OP_OPEN = 0x0002,
    IPC_OP_CLOSE = 0x0003,
    IPC_OP_DETACH = 0x0004,
    IPC_OP_SEND = 0x0005,
    IPC_OP_ACK = 0x0006,
    IPC_OP_STATUS = 0x0010,
    IPC_OP_SESSIONS = 0x0011,
    IPC_OP_METRICS = 0x0012,
    IPC_OP_PING = 0x007F,
    IPC_OP_OK = 0x8000,
    IPC_OP_WELCOME = 0x8001,
    IPC_OP_OPENED = 0x8002,
    IPC_OP_ACCEPTED = 0x8005,
    IPC_OP_RESULT = 0x8010,
    IPC_OP_PONG = 0x807F,
    IPC_OP_ERROR = 0xFFFF,
    IPC_OP_EVENT_MESSAGE = 0x9001,
    IPC_OP_EVENT_ACKED = 0x9002,
    IPC_OP_EVENT_EXPIRED = 0x9003,
    IPC_OP_EVENT_SESSION_STATE = 0x9004,
    IPC_OP_EVENT_LINK_STATE = 0x9005
};

/* The known tags; each has a slot in ipc_frame.value (see ipc_frame.c). */
enum ipc_tag {
    IPC_TAG_IPC_VERSION = 0x0001,
    IPC_TAG_CLIENT_NAME = 0x0002,
    IPC_TAG_DAEMON_VERSION = 0x0003,
    IPC_TAG_MAX_PAYLOAD = 0x0004,
    IPC_TAG_LINK_STATE = 0x0005,
    IPC_TAG_SESSION = 0x0010,
    IPC_TAG_SERVICE = 0x0011,
    IPC_TAG_PRIORITY = 0x0012,
    IPC_TAG_DURABLE = 0x0013,
    IPC_TAG_SESSION_STATE = 0x0014,
    IPC_TAG_SEQ = 0x0015,
    IPC_TAG_SENT_SEQ = 0x0016,
    IPC_TAG_ACKED_SEQ = 0x0017,
    IPC_TAG_DELIVERED_SEQ = 0x0018,
    IPC_TAG_TTL_MS = 0x0019,
    IPC_TAG_PAYLOAD = 0x001A,
    IPC_TAG_CODE = 0x0020,
    IPC_TAG_MESSAGE = 0x0021,
    IPC_TAG_JSON = 0x0022
};

#define IPC_KNOWN_TAG_COUNT 19

/* What ipc_frame_decode() found. */
enum ipc_decode_result {
    IPC_DECODED = 1,
    IPC_NEED_MORE = 0,
    IPC_ERR_LENGTH_TOO_SHORT = -1, /* length below 6 */
    IPC_ERR_LENGTH_TOO_LONG = -2,  /* length above the limit: refused before buffering */
    IPC_ERR_RECORD_OVERRUN = -3,   /* a record runs past the end of the frame */
    IPC_ERR_RECORD_SIZE = -4,      /* a known tag with a value of the wrong size */
    IPC_ERR_DUPLICATE_RECORD = -5  /* a known tag twice in one frame */
};

typedef struct ipc_bytes {
    const uint8_t *data;
    uint32_t length;
} ipc_bytes;

typedef struct ipc_frame {
    uint16_t op;
    uint32_t request;
    uint32_t present; /* one bit per known tag's slot */
    ipc_bytes value[IPC_KNOWN_TAG_COUNT];
} ipc_frame;

/* How many bytes the frame at the start of data takes in all, once its length
 * field is there: IPC_DECODED with *frame_size set, IPC_NEED_MORE, or
 * IPC_ERR_LENGTH_TOO_SHORT / IPC_ERR_LENGTH_TOO_LONG (max_length bounds the
 * length field). Lets a reader refuse a frame before it buffers it. */
int ipc_frame_size(const uint8_t *data, size_t available, uint32_t max_length, size_t *frame_size);

/* Decodes one frame from the start of data. On IPC_DECODED, *consumed is its
 * size and frame points into data. Nothing is consumed otherwise. */
int ipc_frame_decode(const uint8_t *data, size_t available, uint32_t max_length, ipc_frame *frame,
                     size_t *consumed);

bool ipc_frame_has(const ipc_frame *frame, uint16_t tag);
/* The value of a known integer tag (0 when absent); sizes were checked. */
uint64_t ipc_frame_uint(const ipc_frame *frame, uint16_t tag);
ipc_bytes ipc_frame_bytes(const ipc_frame *frame, uint16_t tag);

/* A growable byte buffer that frames are written into, back to back. A failed
 * allocation sets failed and later writes do nothing, so a builder checks once
 * at the end. */
typedef struct ipc_buffer {
    uint8_t *data;
    size_t length;
    size_t capacity;
    size_t frame_start;
    bool failed;
} ipc_buffer;

void ipc_buffer_free(ipc_buffer *buffer);
bool ipc_buffer_reserve(ipc_buffer *buffer, size_t extra);
/* Drops the first count bytes (already written to the socket, or decoded). */
void ipc_buffer_consume(ipc_buffer *buffer, size_t count);

void ipc_frame_begin(ipc_buffer *buffer, uint16_t op, uint32_t request);
void ipc_put_u8(ipc_buffer *buffer, uint16_t tag, uint8_t value);
void ipc_put_u16(ipc_buffer *buffer, uint16_t tag, uint16_t value);
void ipc_put_u32(ipc_buffer *buffer, uint16_t tag, uint32_t value);
void ipc_put_u64(ipc_buffer *buffer, uint16_t tag, uint64_t value);
void ipc_put_bytes(ipc_buffer *buffer, uint16_t tag, const void *value, size_t length);
/* Writes the frame's length field; false if any allocation failed (then the
 * partial frame is removed again). */
bool ipc_frame_end(ipc_buffer *buffer);

/* The longest prefix of text, at most limit bytes, that does not cut a UTF-8
 * sequence in two. */
size_t ipc_utf8_prefix_length(const char *text, size_t length, size_t limit);
/* Whether text is valid UTF-8 (the daemon refuses text records that are not). */
bool ipc_utf8_valid(const char *text, size_t length);

#endif
