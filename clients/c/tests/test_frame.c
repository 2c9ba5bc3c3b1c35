/*
 * test_frame.c - the frame codec against the worked example of imagent-ipc(7)
 * (the shared vectors' bytes) and against hostile input; error codes;
 * the reconnect backoff table.
 */
#include <stdlib.h>
#include <string.h>

#include "connection.h"
#include "errors.h"
#include "imagent.h"
#include "ipc_frame.h"
#include "test.h"

#define LIMIT (1048576u + IPC_FRAME_OVERHEAD)

/* The worked example, byte for byte (vectors/ipc.json "valid"). */
static const char *const hello_hex = "000000170001000000010001000000010100020000000464656d6f";
static const char *const welcome_hex =
    "0000002980010000000100010000000101000300000005302e312e300004000000040010000000050000000102";
static const char *const open_hex = "0000001e000200000002001100000004636861740012000000010000130000000101";
static const char *const opened_hex =
    "000000458002000000020010000000080123456789abcdef0014000000010100160000000800000000000000000017000000080000"
    "0000000000000018000000080000000000000000";
static const char *const send_hex =
    "000000260005000000030010000000080123456789abcdef001a0000000268690019000000040000ea60";
static const char *const accepted_hex =
    "000000228005000000030010000000080123456789abcdef0015000000080000000000000001";
static const char *const message_hex =
    "0000002a9001000000000010000000080123456789abcdef001500000008000000000000000c001a0000000200ff";
static const char *const ack_hex = "000000220006000000000010000000080123456789abcdef001500000008000000000000000c";
static const char *const status_hex = "00000006001000000009";
static const char *const result_hex = "000000208010000000090022000000147b226c696e6b223a22636f6e6e6563746564227d";
static const char *const error_hex =
    "00000031ffff00000004002000000002000500210000001d73657373696f6e20697320617474616368656420656c73657768657265";
static const char *const ping_hex = "00000006007f0000004d";

static const uint64_t example_session = 0x0123456789abcdefULL;

/* Hex to bytes in a static buffer (tests are sequential). */
static size_t unhex(const char *hex, uint8_t *out)
{
    size_t length = strlen(hex) / 2;
    for (size_t i = 0; i < length; i++) {
        char pair[3] = {hex[2 * i], hex[2 * i + 1], 0};
        out[i] = (uint8_t)strtoul(pair, NULL, 16);
    }
    return length;
}

static int decode_hex(const char *hex, uint8_t *bytes, ipc_frame *frame)
{
    size_t length = unhex(hex, bytes);
    size_t consumed = 0;
    int result = ipc_frame_decode(bytes, length, LIMIT, frame, &consumed);
    if (result == IPC_DECODED && consumed != length)
        return -100;
    return result;
}

static int encoded_equals(ipc_buffer *buffer, const char *hex)
{
    uint8_t expected[256];
    size_t length = unhex(hex, expected);
    int equal = buffer->length == length && memcmp(buffer->data, expected, length) == 0;
    ipc_buffer_free(buffer);
    return equal;
}

static void decodes_welcome_of_the_worked_example(void)
{
    uint8_t bytes[256];
    ipc_frame frame;
    CHECK(decode_hex(welcome_hex, bytes, &frame) == IPC_DECODED);
    CHECK(frame.op == IPC_OP_WELCOME && frame.request == 1);
    CHECK(ipc_frame_uint(&frame, IPC_TAG_IPC_VERSION) == 1);
    ipc_bytes version = ipc_frame_bytes(&frame, IPC_TAG_DAEMON_VERSION);
    CHECK(version.length == 5 && memcmp(version.data, "0.1.0", 5) == 0);
    CHECK(ipc_frame_uint(&frame, IPC_TAG_MAX_PAYLOAD) == 1048576);
    CHECK(ipc_frame_uint(&frame, IPC_TAG_LINK_STATE) == 2);
}

static void decodes_opened_accepted_and_events_of_the_worked_example(void)
{
    uint8_t bytes[256];
    ipc_frame frame;
    CHECK(decode_hex(opened_hex, bytes, &frame) == IPC_DECODED);
    CHECK(frame.op == IPC_OP_OPENED && frame.request == 2);
    CHECK(ipc_frame_uint(&frame, IPC_TAG_SESSION) == example_session);
    CHECK(ipc_frame_uint(&frame, IPC_TAG_SESSION_STATE) == 1);
    CHECK(ipc_frame_has(&frame, IPC_TAG_SENT_SEQ) && ipc_frame_uint(&frame, IPC_TAG_SENT_SEQ) == 0);
    CHECK(ipc_frame_has(&frame, IPC_TAG_DELIVERED_SEQ));

    CHECK(decode_hex(accepted_hex, bytes, &frame) == IPC_DECODED);
    CHECK(frame.op == IPC_OP_ACCEPTED && frame.request == 3 && ipc_frame_uint(&frame, IPC_TAG_SEQ) == 1);

    CHECK(decode_hex(message_hex, bytes, &frame) == IPC_DECODED);
    CHECK(frame.op == IPC_OP_EVENT_MESSAGE && frame.request == 0);
    CHECK(ipc_frame_uint(&frame, IPC_TAG_SEQ) == 12);
    ipc_bytes payload = ipc_frame_bytes(&frame, IPC_TAG_PAYLOAD);
    CHECK(payload.length == 2 && payload.data[0] == 0x00 && payload.data[1] == 0xff);

    CHECK(decode_hex(result_hex, bytes, &frame) == IPC_DECODED);
    ipc_bytes json = ipc_frame_bytes(&frame, IPC_TAG_JSON);
    CHECK(json.length == 20 && memcmp(json.data, "{\"link\":\"connected\"}", 20) == 0);

    CHECK(decode_hex(error_hex, bytes, &frame) == IPC_DECODED);
    CHECK(frame.op == IPC_OP_ERROR && frame.request == 4);
    CHECK(imagent_code_from_ipc(ipc_frame_uint(&frame, IPC_TAG_CODE)) == IMAGENT_ERR_SESSION_BUSY);
}

static void encodes_the_requests_of_the_worked_example(void)
{
    ipc_buffer buffer = {0};
    ipc_frame_begin(&buffer, IPC_OP_HELLO, 1);
    ipc_put_u8(&buffer, IPC_TAG_IPC_VERSION, 1);
    ipc_put_bytes(&buffer, IPC_TAG_CLIENT_NAME, "demo", 4);
    CHECK(ipc_frame_end(&buffer));
    CHECK(encoded_equals(&buffer, hello_hex));

    ipc_frame_begin(&buffer, IPC_OP_OPEN, 2);
    ipc_put_bytes(&buffer, IPC_TAG_SERVICE, "chat", 4);
    ipc_put_u8(&buffer, IPC_TAG_PRIORITY, 0);
    ipc_put_u8(&buffer, IPC_TAG_DURABLE, 1);
    CHECK(ipc_frame_end(&buffer));
    CHECK(encoded_equals(&buffer, open_hex));

    ipc_frame_begin(&buffer, IPC_OP_SEND, 3);
    ipc_put_u64(&buffer, IPC_TAG_SESSION, example_session);
    ipc_put_bytes(&buffer, IPC_TAG_PAYLOAD, "hi", 2);
    ipc_put_u32(&buffer, IPC_TAG_TTL_MS, 60000);
    CHECK(ipc_frame_end(&buffer));
    CHECK(encoded_equals(&buffer, send_hex));

    ipc_frame_begin(&buffer, IPC_OP_ACK, 0);
    ipc_put_u64(&buffer, IPC_TAG_SESSION, example_session);
    ipc_put_u64(&buffer, IPC_TAG_SEQ, 12);
    CHECK(ipc_frame_end(&buffer));
    CHECK(encoded_equals(&buffer, ack_hex));

    ipc_frame_begin(&buffer, IPC_OP_STATUS, 9);
    CHECK(ipc_frame_end(&buffer));
    CHECK(encoded_equals(&buffer, status_hex));

    ipc_frame_begin(&buffer, IPC_OP_PING, 0x4d);
    CHECK(ipc_frame_end(&buffer));
    CHECK(encoded_equals(&buffer, ping_hex));
}

/* Every prefix of a frame is "need more"; nothing is decoded early. */
static void needs_more_for_every_prefix_byte_by_byte(void)
{
    uint8_t bytes[256];
    size_t length = unhex(message_hex, bytes);
    for (size_t available = 0; available < length; available++) {
        ipc_frame frame;
        size_t consumed = 0;
        CHECK(ipc_frame_decode(bytes, available, LIMIT, &frame, &consumed) == IPC_NEED_MORE);
    }
}

static void decodes_frames_back_to_back(void)
{
    uint8_t bytes[512];
    size_t length = unhex(accepted_hex, bytes);
    length += unhex(message_hex, bytes + length);
    ipc_frame frame;
    size_t consumed = 0;
    CHECK(ipc_frame_decode(bytes, length, LIMIT, &frame, &consumed) == IPC_DECODED);
    CHECK(frame.op == IPC_OP_ACCEPTED);
    size_t first = consumed;
    CHECK(ipc_frame_decode(bytes + first, length - first, LIMIT, &frame, &consumed) == IPC_DECODED);
    CHECK(frame.op == IPC_OP_EVENT_MESSAGE && first + consumed == length);
}

static void refuses_a_length_below_six(void)
{
    uint8_t bytes[16];
    ipc_frame frame;
    size_t consumed;
    size_t length = unhex("000000020001", bytes);
    CHECK(ipc_frame_decode(bytes, length, LIMIT, &frame, &consumed) == IPC_ERR_LENGTH_TOO_SHORT);
}

/* The length field alone condemns it: before the rest has arrived. */
static void refuses_an_oversize_length_from_its_first_four_bytes(void)
{
    uint8_t bytes[16];
    ipc_frame frame;
    size_t consumed, size;
    size_t length = unhex("ffffffff", bytes);
    CHECK(ipc_frame_decode(bytes, length, LIMIT, &frame, &consumed) == IPC_ERR_LENGTH_TOO_LONG);
    CHECK(ipc_frame_size(bytes, length, LIMIT, &size) == IPC_ERR_LENGTH_TOO_LONG);
    /* One above the limit too. */
    uint32_t above = LIMIT + 1;
    uint8_t field[4] = {(uint8_t)(above >> 24), (uint8_t)(above >> 16), (uint8_t)(above >> 8), (uint8_t)above};
    CHECK(ipc_frame_size(field, 4, LIMIT, &size) == IPC_ERR_LENGTH_TOO_LONG);
}

static void refuses_a_record_running_past_the_frame(void)
{
    uint8_t bytes[64];
    ipc_frame frame;
    size_t consumed;
    size_t length = unhex("0000000d000500000001001a0000003278", bytes); /* vectors: tlv_overrun */
    CHECK(ipc_frame_decode(bytes, length, LIMIT, &frame, &consumed) == IPC_ERR_RECORD_OVERRUN);
    /* A record length of 0xffffffff must not wrap the offset around. */
    length = unhex("0000000e000500000001001affffffff7878", bytes);
    CHECK(ipc_frame_decode(bytes, length, LIMIT, &frame, &consumed) == IPC_ERR_RECORD_OVERRUN);
    /* A truncated record header (3 of its 6 bytes). */
    length = unhex("00000009800000000001001a00", bytes);
    CHECK(ipc_frame_decode(bytes, length, LIMIT, &frame, &consumed) == IPC_ERR_RECORD_OVERRUN);
}

/* Builds a frame with the encoder and decodes it again. */
static int decode_built(ipc_buffer *buffer)
{
    ipc_frame frame;
    size_t consumed = 0;
    int result = ipc_frame_end(buffer) ? ipc_frame_decode(buffer->data, buffer->length, LIMIT, &frame, &consumed)
                                       : -100;
    if (result == IPC_DECODED && (consumed != buffer->length || ipc_frame_uint(&frame, IPC_TAG_SEQ) != 9))
        result = -101;
    ipc_buffer_free(buffer);
    return result;
}

static void refuses_a_known_tag_twice_or_of_the_wrong_size(void)
{
    ipc_buffer buffer = {0};
    ipc_frame_begin(&buffer, IPC_OP_ACCEPTED, 1);
    ipc_put_u64(&buffer, IPC_TAG_SEQ, 9);
    ipc_put_u64(&buffer, IPC_TAG_SEQ, 10);
    CHECK(decode_built(&buffer) == IPC_ERR_DUPLICATE_RECORD);

    ipc_frame_begin(&buffer, IPC_OP_ACCEPTED, 1);
    ipc_put_bytes(&buffer, IPC_TAG_SEQ, "\xaa\xaa", 2);
    CHECK(decode_built(&buffer) == IPC_ERR_RECORD_SIZE);

    ipc_frame_begin(&buffer, IPC_OP_ERROR, 1);
    ipc_put_u32(&buffer, IPC_TAG_CODE, 5); /* CODE is a u16 */
    CHECK(decode_built(&buffer) == IPC_ERR_RECORD_SIZE);
}

static void skips_a_tag_it_does_not_know(void)
{
    ipc_buffer buffer = {0};
    ipc_frame_begin(&buffer, IPC_OP_PONG, 5);
    ipc_put_bytes(&buffer, 0x7777, "abc", 3);
    ipc_put_u64(&buffer, IPC_TAG_SEQ, 9);
    ipc_put_bytes(&buffer, 0x0099, "", 0);
    CHECK(decode_built(&buffer) == IPC_DECODED);
}

static void cuts_text_at_a_utf8_boundary(void)
{
    /* "aé": cutting at 2 would split é (c3 a9) in two. */
    CHECK(ipc_utf8_prefix_length("a\xc3\xa9", 3, 2) == 1);
    CHECK(ipc_utf8_prefix_length("a\xc3\xa9", 3, 3) == 3);
    CHECK(ipc_utf8_prefix_length("abc", 3, 2) == 2);
    /* A 4-byte sequence (U+1F600) cut anywhere inside goes whole. */
    CHECK(ipc_utf8_prefix_length("\xf0\x9f\x98\x80z", 5, 3) == 0);
}

static void validates_utf8_text(void)
{
    CHECK(ipc_utf8_valid("plain", 5));
    CHECK(ipc_utf8_valid("caf\xc3\xa9", 5));
    CHECK(ipc_utf8_valid("\xf0\x9f\x98\x80", 4));
    CHECK(!ipc_utf8_valid("\xc3", 1));                 /* cut short */
    CHECK(!ipc_utf8_valid("\x80", 1));                 /* a lone continuation byte */
    CHECK(!ipc_utf8_valid("\xc0\xaf", 2));             /* overlong */
    CHECK(!ipc_utf8_valid("\xe0\x80\xaf", 3));         /* overlong */
    CHECK(!ipc_utf8_valid("\xed\xa0\x80", 3));         /* a UTF-16 surrogate */
    CHECK(!ipc_utf8_valid("\xf4\x90\x80\x80", 4));     /* above U+10FFFF */
}

static void maps_error_codes_and_names_them(void)
{
    CHECK(imagent_code_from_ipc(1) == IMAGENT_ERR_BAD_REQUEST);
    CHECK(imagent_code_from_ipc(6) == IMAGENT_ERR_QUEUE_FULL);
    CHECK(imagent_code_from_ipc(13) == IMAGENT_ERR_EXPIRED);
    CHECK(imagent_code_from_ipc(14) == IMAGENT_ERR_INTERNAL); /* unknown: like INTERNAL */
    CHECK(imagent_code_from_ipc(0) == IMAGENT_ERR_INTERNAL);
    CHECK(strcmp(imagent_error_name(IMAGENT_ERR_PAYLOAD_TOO_LARGE), "PAYLOAD_TOO_LARGE") == 0);
    CHECK(strcmp(imagent_error_name(IMAGENT_ERR_UNAVAILABLE), "DAEMON_UNAVAILABLE") == 0);
    CHECK(strcmp(imagent_error_name(IMAGENT_ERR_TIMEDOUT), "TIMED_OUT") == 0);
    for (int code = 0; code >= -13; code--)
        CHECK(imagent_strerror(code)[0] != '\0');
    for (int code = -100; code >= -106; code--)
        CHECK(strcmp(imagent_error_name(code), "UNKNOWN_ERROR") != 0);
    CHECK(strcmp(imagent_strerror(-77), "unknown error code") == 0);
}

static void backs_off_by_doubling_up_to_a_second(void)
{
    CHECK(imagent_reconnect_delay_ms(1) == 0);
    CHECK(imagent_reconnect_delay_ms(2) == 50);
    CHECK(imagent_reconnect_delay_ms(3) == 100);
    CHECK(imagent_reconnect_delay_ms(6) == 800);
    CHECK(imagent_reconnect_delay_ms(7) == 1000);
    CHECK(imagent_reconnect_delay_ms(1000) == 1000);
}

void run_frame_tests(void)
{
    RUN(decodes_welcome_of_the_worked_example);
    RUN(decodes_opened_accepted_and_events_of_the_worked_example);
    RUN(encodes_the_requests_of_the_worked_example);
    RUN(needs_more_for_every_prefix_byte_by_byte);
    RUN(decodes_frames_back_to_back);
    RUN(refuses_a_length_below_six);
    RUN(refuses_an_oversize_length_from_its_first_four_bytes);
    RUN(refuses_a_record_running_past_the_frame);
    RUN(refuses_a_known_tag_twice_or_of_the_wrong_size);
    RUN(skips_a_tag_it_does_not_know);
    RUN(cuts_text_at_a_utf8_boundary);
    RUN(validates_utf8_text);
    RUN(maps_error_codes_and_names_them);
    RUN(backs_off_by_doubling_up_to_a_second);
}
