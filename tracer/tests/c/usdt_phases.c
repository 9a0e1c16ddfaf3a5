/* usage: usdt_phases N: announces its phases through USDT probes (<sys/sdt.h>), each guarded
 * by its semaphore as dtrace -h headers do, so the probes fire only while a tracer has set
 * the semaphores. 100 getpid() calls of setup, phase (case 201, N) with N calls, phase
 * (case 202, 2N) with 2N calls, 30 calls of teardown. Each probe has two sites, with the
 * arguments in different places (constants, registers, the stack). Prints the semaphores
 * it saw on stderr. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

unsigned short tracer_phase_begin_semaphore __attribute__((section(".probes")));
unsigned short tracer_phase_end_semaphore __attribute__((section(".probes")));
#define TRACER_ENABLED(probe) __builtin_expect(tracer_##probe##_semaphore, 0)

static long __attribute__((noinline)) calls(long k) {
    long sum = 0;
    for (long i = 0; i < k; i++) sum += syscall(SYS_getpid);
    return sum;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s N\n", argv[0]); return 2; }
    long n = atol(argv[1]);
    long sum = calls(100);
    unsigned begin_sem = tracer_phase_begin_semaphore, end_sem = tracer_phase_end_semaphore;

    /* Phase 1: the case a constant, N in a register, ops from memory. */
    volatile unsigned long ops1 = n;
    if (TRACER_ENABLED(phase_begin)) DTRACE_PROBE2(tracer, phase_begin, 201, n);
    sum += calls(n);
    if (TRACER_ENABLED(phase_end)) DTRACE_PROBE3(tracer, phase_end, 201, n, ops1);

    /* Phase 2: a signed case from memory, 2N computed. */
    volatile int case2 = 202;
    long n2 = 2 * n;
    if (TRACER_ENABLED(phase_begin)) DTRACE_PROBE2(tracer, phase_begin, case2, n2);
    sum += calls(n2);
    if (TRACER_ENABLED(phase_end)) DTRACE_PROBE3(tracer, phase_end, case2, n2, n2);

    sum += calls(30);
    fprintf(stderr, "semaphores: begin=%u end=%u\n", begin_sem, end_sem);
    printf("%ld\n", sum);
    return 0;
}
