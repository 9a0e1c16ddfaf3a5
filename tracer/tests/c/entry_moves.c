// Syscalls that leave their CPU: `entry_moves CPU_A CPU_B`.
//
// Pinned to CPU_A, the main thread makes 1000 nanosleep(1 ms) calls (each blocks: switched
// out and back in inside the call), then 50 ppoll() calls on a pipe during each of which a
// helper thread re-pins it to the other CPU and then writes the byte that wakes it (each
// returns on another CPU than it entered on), then 100000 getppid() calls (none leaves its
// CPU). Raw syscall(2) numbers, so that libc adds none of these calls; the helper sleeps
// with clock_nanosleep and reads its own pipe, never the calls counted here. Prints how
// many ppoll calls returned on the CPU they were sent to.
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SLEEPS 1000
#define MOVES 50
#define QUICK 100000

static int cpus[2];
static pid_t main_tid;
static int go[2], wake[2];

static void pin(pid_t tid, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(tid, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(1);
    }
}

static void *helper(void *arg) {
    (void)arg;
    for (int i = 0; i < MOVES; i++) {
        char c;
        if (read(go[0], &c, 1) != 1)
            exit(1);
        // Long enough for the main thread to be asleep inside ppoll.
        struct timespec ts = {0, 2 * 1000 * 1000};
        syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL);
        pin(main_tid, cpus[(i + 1) % 2]);
        if (write(wake[1], "x", 1) != 1)
            exit(1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: entry_moves CPU_A CPU_B\n");
        return 2;
    }
    cpus[0] = atoi(argv[1]);
    cpus[1] = atoi(argv[2]);
    main_tid = (pid_t)syscall(SYS_gettid);
    pin(main_tid, cpus[0]);
    for (int i = 0; i < SLEEPS; i++) {
        struct timespec ts = {0, 1000 * 1000};
        syscall(SYS_nanosleep, &ts, NULL);
    }
    if (pipe(go) != 0 || pipe(wake) != 0)
        return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, helper, NULL) != 0)
        return 1;
    int moved = 0;
    for (int i = 0; i < MOVES; i++) {
        if (write(go[1], "g", 1) != 1)
            return 1;
        struct pollfd p = {.fd = wake[0], .events = POLLIN};
        syscall(SYS_ppoll, &p, 1, NULL, NULL, 8);
        if (sched_getcpu() == cpus[(i + 1) % 2])
            moved++;
        char c;
        if (read(wake[0], &c, 1) != 1)
            return 1;
    }
    pthread_join(t, NULL);
    for (int i = 0; i < QUICK; i++)
        syscall(SYS_getppid);
    printf("%d\n", moved);
    return 0;
}
