/*
 * test.h - the unit tests' small harness: CHECK stops the current test and
 * counts it failed; main() prints "N passed, M failed".
 */
#ifndef IMAGENT_TEST_H
#define IMAGENT_TEST_H

#include <stdio.h>

extern const char *current_test;
extern int current_test_failed;

#define CHECK(condition)                                                                                   \
    do {                                                                                                   \
        if (!(condition)) {                                                                                \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, current_test, #condition); \
            current_test_failed = 1;                                                                       \
            return;                                                                                        \
        }                                                                                                  \
    } while (0)

typedef void (*test_function)(void);
void run_test(const char *name, test_function test);
#define RUN(test) run_test(#test, test)

void run_frame_tests(void);
void run_connection_tests(void);
void run_session_tests(void);
void run_client_tests(void);

#endif
