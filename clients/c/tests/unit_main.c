/*
 * unit_main.c - runs every unit test and prints the closing count.
 */
#include <stdio.h>

#include "test.h"

const char *current_test;
int current_test_failed;
static int passed, failed;

void run_test(const char *name, test_function test)
{
    current_test = name;
    current_test_failed = 0;
    test();
    if (current_test_failed) {
        failed++;
        printf("FAIL %s\n", name);
    } else {
        passed++;
        printf("ok   %s\n", name);
    }
    fflush(stdout);
}

int main(void)
{
    run_frame_tests();
    run_connection_tests();
    run_session_tests();
    run_client_tests();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
