/*
 * fuzz_ipc_frame.c - libFuzzer target for libimagent's frame decoder, the
 * code that turns the daemon's bytes into frames and records.
 *
 * The input is read as a stream of frames, as the client reads its socket,
 * until the decoder wants more bytes or refuses them. Every decoded frame is
 * checked: it lies inside the input, its known records lie inside it and
 * have their sizes, and re-encoding those records gives a frame that decodes
 * to the same values. Any violation aborts (a finding).
 *
 *   make -C clients/c fuzz && clients/c/build-fuzz/fuzz-c-ipc CORPUS  (or scripts/fuzz 60 fuzz-c-ipc)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_frame.h"

/* Small, so short inputs reach the frame-too-large path as well as frames
 * that fit (the Swift target uses the same limit). */
#define FUZZ_MAX_LENGTH (4096u + IPC_FRAME_OVERHEAD)

static const uint16_t known_tags[] = {
    IPC_TAG_IPC_VERSION, IPC_TAG_CLIENT_NAME,   IPC_TAG_DAEMON_VERSION, IPC_TAG_MAX_PAYLOAD, IPC_TAG_LINK_STATE,
    IPC_TAG_SESSION,     IPC_TAG_SERVICE,       IPC_TAG_PRIORITY,       IPC_TAG_DURABLE,     IPC_TAG_SESSION_STATE,
    IPC_TAG_SEQ,         IPC_TAG_SENT_SEQ,      IPC_TAG_ACKED_SEQ,      IPC_TAG_DELIVERED_SEQ, IPC_TAG_TTL_MS,
    IPC_TAG_PAYLOAD,     IPC_TAG_CODE,          IPC_TAG_MESSAGE,        IPC_TAG_JSON,
};
#define KNOWN_TAGS (sizeof known_tags / sizeof known_tags[0])

static void require(int condition)
{
    if (!condition)
        abort();
}

static void check_frame(const uint8_t *start, size_t consumed, const ipc_frame *frame)
{
    ipc_buffer again = {0};
    ipc_frame_begin(&again, frame->op, frame->request);
    for (size_t i = 0; i < KNOWN_TAGS; i++) {
        if (!ipc_frame_has(frame, known_tags[i]))
            continue;
        ipc_bytes value = ipc_frame_bytes(frame, known_tags[i]);
        require(value.data >= start + IPC_HEADER_SIZE && value.data + value.length <= start + consumed);
        ipc_put_bytes(&again, known_tags[i], value.data, value.length);
    }
    require(ipc_frame_end(&again));

    ipc_frame decoded;
    size_t again_consumed = 0;
    require(ipc_frame_decode(again.data, again.length, UINT32_MAX, &decoded, &again_consumed) == IPC_DECODED);
    require(again_consumed == again.length && again.length <= consumed);
    require(decoded.op == frame->op && decoded.request == frame->request && decoded.present == frame->present);
    for (size_t i = 0; i < KNOWN_TAGS; i++) {
        ipc_bytes before = ipc_frame_bytes(frame, known_tags[i]);
        ipc_bytes after = ipc_frame_bytes(&decoded, known_tags[i]);
        require(before.length == after.length);
        require(before.length == 0 || memcmp(before.data, after.data, before.length) == 0);
        require(ipc_frame_uint(frame, known_tags[i]) == ipc_frame_uint(&decoded, known_tags[i]));
    }
    ipc_buffer_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t offset = 0;
    for (;;) {
        ipc_frame frame;
        size_t consumed = 0, frame_size = 0;
        int sized = ipc_frame_size(data + offset, size - offset, FUZZ_MAX_LENGTH, &frame_size);
        int result = ipc_frame_decode(data + offset, size - offset, FUZZ_MAX_LENGTH, &frame, &consumed);
        if (result != IPC_DECODED) {
            /* A length the size check refuses, the decoder refuses too. */
            require(sized >= 0 || result == sized);
            break;
        }
        require(sized == IPC_DECODED && consumed == frame_size && consumed <= size - offset);
        require(consumed >= IPC_HEADER_SIZE);
        check_frame(data + offset, consumed, &frame);
        offset += consumed;
    }
    return 0;
}
