/* poll_pipes N K: N pipes, then K polls of all N read ends (nothing ready, timeout 0). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/resource.h>
int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: poll_pipes N K\n"); return 2; }
    long n = atol(argv[1]), k = atol(argv[2]);
    struct rlimit r = { 2 * n + 64, 2 * n + 64 };
    if (setrlimit(RLIMIT_NOFILE, &r)) { perror("setrlimit"); return 1; }
    struct pollfd *p = calloc(n, sizeof *p);
    for (long i = 0; i < n; i++) {
        int fd[2];
        if (pipe(fd)) { perror("pipe"); return 1; }
        p[i].fd = fd[0]; p[i].events = POLLIN;
    }
    for (long j = 0; j < k; j++)
        if (poll(p, n, 0) != 0) { fprintf(stderr, "poll: unexpected\n"); return 1; }
    return 0;
}
