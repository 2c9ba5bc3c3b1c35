// glibc's allocator extensions (malloc_trim), which the Glibc module does not export.
#include <malloc.h>
