// CRC-32C for IMLink frames. The hardware path runs three independent streams
// of `crc32` so its 3-cycle latency is hidden, then joins them by multiplying
// the earlier streams by x^(8*BLOCK) modulo the polynomial.
#include "crc32c.h"

#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static int have_sse42;

static void build_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ POLY : crc >> 1;
        table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = table[0][crc & 0xFF] ^ (crc >> 8);
            table[k][n] = crc;
        }
    }
}

static uint32_t software(uint32_t crc, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) { crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;
        crc = table[7][word & 0xFF] ^ table[6][(word >> 8) & 0xFF] ^ table[5][(word >> 16) & 0xFF]
            ^ table[4][(word >> 24) & 0xFF] ^ table[3][(word >> 32) & 0xFF] ^ table[2][(word >> 40) & 0xFF]
            ^ table[1][(word >> 48) & 0xFF] ^ table[0][word >> 56];
        p += 8; n -= 8;
    }
    while (n--) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

// Multiplication modulo the CRC polynomial (bit-reflected: x^k is bit 31 - k), used to
// shift a CRC past bytes covered by another: the three-way loop's earlier streams, and a
// frame header's CRC past the body whose CRC is known (`imagent_crc32c_shift`).
static uint32_t gf2_multiply(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (int i = 0; i < 32; i++) {
        if (b & 0x80000000u) product ^= a;
        b <<= 1;
        a = (a & 1) ? (a >> 1) ^ POLY : a >> 1;
    }
    return product;
}

// x^(8 * 2^k) mod P for each bit k of a length: `imagent_crc32c_shift` multiplies by the
// ones a length's set bits name, at most one multiplication per bit.
static uint32_t power_of_two_shifts[64];

#if defined(__x86_64__)
#include <nmmintrin.h>

enum { BLOCK = 4096 }; // bytes per stream per round in the three-way loop
static uint32_t block_shift;

__attribute__((target("sse4.2")))
static uint32_t hardware(uint32_t crc, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) { crc = _mm_crc32_u8(crc, *p++); n--; }
    while (n >= 3 * BLOCK) {
        uint64_t a = crc, b = 0, c = 0;
        for (size_t i = 0; i < BLOCK; i += 8) {
            uint64_t wa, wb, wc;
            memcpy(&wa, p + i, 8);
            memcpy(&wb, p + BLOCK + i, 8);
            memcpy(&wc, p + 2 * BLOCK + i, 8);
            a = _mm_crc32_u64(a, wa);
            b = _mm_crc32_u64(b, wb);
            c = _mm_crc32_u64(c, wc);
        }
        crc = gf2_multiply((uint32_t)a, block_shift) ^ (uint32_t)b;
        crc = gf2_multiply(crc, block_shift) ^ (uint32_t)c;
        p += 3 * BLOCK; n -= 3 * BLOCK;
    }
    uint64_t c64 = crc;
    while (n >= 8) { uint64_t w; memcpy(&w, p, 8); c64 = _mm_crc32_u64(c64, w); p += 8; n -= 8; }
    crc = (uint32_t)c64;
    while (n--) crc = _mm_crc32_u8(crc, *p++);
    return crc;
}
#endif

__attribute__((constructor))
static void crc32c_init(void) {
    build_tables();
    power_of_two_shifts[0] = 0x80000000u >> 8; // x^8: one byte
    for (int k = 1; k < 64; k++) power_of_two_shifts[k] = gf2_multiply(power_of_two_shifts[k - 1], power_of_two_shifts[k - 1]);
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
    block_shift = imagent_crc32c_shift(0x80000000u, BLOCK); // x^0 shifted past a block
#endif
}

uint32_t imagent_crc32c_update(uint32_t state, const void *bytes, size_t length) {
#if defined(__x86_64__)
    if (have_sse42) return hardware(state, (const uint8_t *)bytes, length);
#endif
    return software(state, (const uint8_t *)bytes, length);
}

int imagent_crc32c_is_hardware(void) { return have_sse42; }

uint32_t imagent_crc32c_shift(uint32_t crc, size_t length) {
    for (int k = 0; length; k++, length >>= 1) {
        if (length & 1) crc = gf2_multiply(crc, power_of_two_shifts[k]);
    }
    return crc;
}
