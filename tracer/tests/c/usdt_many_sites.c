/* usage: usdt_many_sites N: 13 separate tracer:phase_begin sites (one more than the tracer
 * has program copies for), so the tracer must refuse it by name rather than drop some. */
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>

#define SITE(k) do { if (n == (k)) DTRACE_PROBE2(tracer, phase_begin, k, n); } while (0)

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0;
    SITE(1); SITE(2); SITE(3); SITE(4); SITE(5); SITE(6); SITE(7);
    SITE(8); SITE(9); SITE(10); SITE(11); SITE(12); SITE(13);
    DTRACE_PROBE3(tracer, phase_end, 0, n, 0);
    printf("%ld\n", n);
    return 0;
}
