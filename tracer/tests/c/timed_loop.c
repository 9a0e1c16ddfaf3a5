/* usage: timed_loop N: 500 getpid() calls of setup in main, then timed_loop(N) twice (N
 * getpid() calls each), then 77 calls of teardown. No markers: `tracer --phase-fn
 * BINARY:timed_loop` counts only the calls made inside timed_loop. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

long __attribute__((noinline)) timed_loop(long n) {
    long sum = 0;
    for (long i = 0; i < n; i++) sum += syscall(SYS_getpid);
    return sum;
}

/* Not the same body as timed_loop: identical functions may be folded into one address, and
 * a probe on one would then fire for both. */
static long __attribute__((noinline)) outside(long k) {
    long x = 0;
    for (long i = 0; i < k; i++) x ^= syscall(SYS_getpid) + i;
    return x;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s N\n", argv[0]); return 2; }
    long n = atol(argv[1]);
    long sum = outside(500);
    sum += timed_loop(n);
    sum += timed_loop(n);
    sum += outside(77);
    printf("%ld\n", sum);
    return 0;
}
