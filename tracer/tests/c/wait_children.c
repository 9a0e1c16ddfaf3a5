/* An unmodified benchmark shape: setup, a timed loop in main, teardown; no markers.
 * usage: wait_children N ITERS MODE
 *   MODE pid:     ITERS x (fork a child that exits; waitpid(child))
 *   MODE wnohang: ITERS x waitpid(-1, WNOHANG) with nothing to reap
 * with N idle children alive throughout. Prints the mean ns per op of the timed loop. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s N ITERS pid|wnohang\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]), iters = atol(argv[2]);
    int wnohang = strcmp(argv[3], "wnohang") == 0;
    pid_t *kids = calloc(n > 0 ? n : 1, sizeof(pid_t));
    for (long i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0) { perror("fork"); return 1; }
        if (p == 0) { for (;;) pause(); }
        kids[i] = p;
    }
    long long t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        if (wnohang) {
            if (waitpid(-1, NULL, WNOHANG) != 0) { fprintf(stderr, "reaped something\n"); return 1; }
        } else {
            pid_t p = fork();
            if (p < 0) { perror("fork"); return 1; }
            if (p == 0) _exit(0);
            if (waitpid(p, NULL, 0) != p) { perror("waitpid"); return 1; }
        }
    }
    long long t1 = now_ns();
    for (long i = 0; i < n; i++) kill(kids[i], SIGKILL);
    for (long i = 0; i < n; i++) waitpid(kids[i], NULL, 0);
    printf("%ld %.0f\n", n, (double)(t1 - t0) / (iters > 0 ? iters : 1));
    return 0;
}
