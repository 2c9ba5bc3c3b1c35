#ifndef IMAGENT_CRC32C_H
#define IMAGENT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Continues a CRC-32C (Castagnoli, reflected) over `length` bytes.
/// `state` is the raw register: start with 0xFFFFFFFF and xor the result with
/// 0xFFFFFFFF at the end. Uses SSE4.2 `crc32` when the CPU has it, else
/// slicing-by-8 tables.
uint32_t imagent_crc32c_update(uint32_t state, const void *bytes, size_t length);

/// `crc` (a finished CRC-32C, or a raw register) followed by `length` zero bytes' worth of
/// shifting: CRC(A || B) = imagent_crc32c_shift(CRC(A), |B|) ^ CRC(B), so the CRC of a frame
/// follows from its header's and its body's without reading the body again.
uint32_t imagent_crc32c_shift(uint32_t crc, size_t length);

/// 1 when the hardware path is in use (for benchmarks and logs).
int imagent_crc32c_is_hardware(void);

#endif
