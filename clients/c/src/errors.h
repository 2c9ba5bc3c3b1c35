/*
 * errors.h - from the daemon's IPC error codes to imagent codes.
 */
#ifndef IMAGENT_ERRORS_H
#define IMAGENT_ERRORS_H

#include <stdint.h>

#include "ipc_frame.h"

/* The negative imagent code of an IPC error code; a code the library does not
 * know is INTERNAL (imagent-ipc(7), ERROR CODES). */
int imagent_code_from_ipc(uint64_t ipc_code);
/* The imagent code of a frame's CODE record (an ERROR, an EXPIRED event). */
int imagent_code_from_frame(const ipc_frame *frame);

#endif
